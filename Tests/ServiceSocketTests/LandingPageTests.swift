import Foundation
import PrefetchRuntime
import PrefetchTestSupport
import ServiceTestSupport
import Testing

@testable import PrefetchService

/// `GET /`: the first thing a newcomer opens.
@Suite struct LandingPageTests {
    @Test func itLinksTheDemoPageThroughTheShellWhenTheConfigHasOne() async throws {
        let config = TestConfig([
            TestPage(
                "http://127.0.0.1:8080/demo/page.html",
                [
                    TestInterface(name: "demo.profile", api: "http://127.0.0.1:9090/demo/profile?delay=300&x=<b>")
                ])
        ])
        var settings = testSettings()
        settings.listeners.demo = true
        try await withService(config: config, settings: settings) { service in
            let reply = try await service.get("/")
            #expect(reply.status == 200)
            #expect(reply.header("Content-Type") == "text/html; charset=utf-8")
            #expect(reply.header("X-Content-Type-Options") == "nosniff")
            #expect(
                reply.text.contains(
                    #"href="/demo/shell.html?api=http%3A%2F%2F127.0.0.1%3A9090%2Fdemo%2Fprofile%3Fdelay%3D300%26x%3D%3Cb%3E""#),
                "\(reply.text)")
            #expect(!reply.text.contains("<b>"), "config text is escaped")
        }
    }

    @Test func withoutADemoEntryItSaysHowToGetOne() async throws {
        try await withService(
            config: TestConfig([TestPage("https://m.example.com/p", [TestInterface(api: "https://api.example.com/a")])])
        ) { service in
            let reply = try await service.get("/")
            #expect(reply.status == 200)
            #expect(reply.text.contains("No demo page is served"))
            #expect(!reply.text.contains("/demo/shell.html?api="))
        }
    }
}
