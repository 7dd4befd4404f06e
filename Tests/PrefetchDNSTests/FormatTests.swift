import Foundation
import Testing

@testable import PrefetchDNS

@Suite struct HTTPDNSAnswerTests {
    func parse(_ json: String, host: String = "api.prefetch.test") throws(DNSError) -> HTTPDNSAnswer {
        try HTTPDNSAnswer.parse(Array(json.utf8), host: host)
    }

    @Test func acceptsIPv4AndIPv6Literals() throws {
        let answer = try parse(#"{"host":"api.prefetch.test","ips":["1.2.3.4","2001:DB8::1","1.2.3.4"],"ttl":30}"#)
        #expect(answer.addresses == ["1.2.3.4", "2001:db8::1"])
        #expect(answer.ttl == 30)
        #expect(try parse(#"{"ips":["127.0.0.1"]}"#).ttl == nil)
    }

    @Test(arguments: [
        #"{"host":"api.prefetch.test","ips":["evil.example"],"ttl":60}"#,
        #"{"host":"api.prefetch.test","ips":["1.2.3.4","evil.example"],"ttl":60}"#,
        #"{"host":"api.prefetch.test","ips":["[::1]"],"ttl":60}"#,
        #"{"host":"api.prefetch.test","ips":["fe80::1%eth0"],"ttl":60}"#,
        #"{"host":"api.prefetch.test","ips":["1.2.3"],"ttl":60}"#,
        #"{"host":"api.prefetch.test","ips":[],"ttl":60}"#,
        #"{"host":"other.prefetch.test","ips":["1.2.3.4"],"ttl":60}"#,
        #"{"host":"api.prefetch.test","ips":["1.2.3.4"],"ttl":-1}"#,
        #"{"host":"api.prefetch.test","ips":["1.2.3.4"],"ttl":"60"}"#,
        #"{"host":"api.prefetch.test","ips":"1.2.3.4"}"#,
        #"{"host":"api.prefetch.test"}"#,
        #"not json"#,
        #"["1.2.3.4"]"#,
    ])
    func rejectsAnythingButIPLiterals(_ json: String) {
        #expect(throws: DNSError.self) { try parse(json) }
        do {
            _ = try parse(json)
        } catch {
            #expect(error.code == .invalidAnswer)
            #expect(error.message.contains("api.prefetch.test"))
        }
    }
}

@Suite struct ConnectToFormatTests {
    @Test func formatsEntriesWithBracketedIPv6() {
        #expect(connectToEntry(host: "api.prefetch.test", port: 443, address: "10.0.0.1") == "api.prefetch.test:443:10.0.0.1:443")
        #expect(connectToEntry(host: "api.prefetch.test", port: 8443, address: "::1") == "api.prefetch.test:8443:[::1]:8443")
    }

    @Test func parsesHostAndEffectivePort() {
        #expect(hostAndPort(ofURL: "https://API.prefetch.test/a?b=c")! == ("api.prefetch.test", 443))
        #expect(hostAndPort(ofURL: "http://api.prefetch.test/")! == ("api.prefetch.test", 80))
        #expect(hostAndPort(ofURL: "https://user:pw@api.prefetch.test:8443")! == ("api.prefetch.test", 8443))
        #expect(hostAndPort(ofURL: "http://[::1]:9000/x")! == ("::1", 9000))
        #expect(hostAndPort(ofURL: "ftp://api.prefetch.test/") == nil)
        #expect(hostAndPort(ofURL: "https://:443/") == nil)
        #expect(hostAndPort(ofURL: "https://api.prefetch.test:99999/") == nil)
    }
}

@Suite struct DNSSettingsTests {
    @Test func emptyJSONTakesEveryDefault() throws {
        let settings = try JSONDecoder().decode(DNSSettings.self, from: Data("{}".utf8))
        #expect(settings == DNSSettings())
        #expect(settings.httpdns == nil)
        #expect(settings.timeoutMs == 1000)
        #expect(settings.systemTTL == 60)
        #expect(settings.refreshAhead == 0.75)
        try settings.validate()
    }

    @Test func decodesGivenFields() throws {
        let json = #"{"httpdns":"https://dns.example/resolve","timeoutMs":500,"systemTTL":30,"minTTL":2,"maxTTL":600}"#
        let settings = try JSONDecoder().decode(DNSSettings.self, from: Data(json.utf8))
        #expect(settings.httpdns == "https://dns.example/resolve")
        #expect(settings.timeoutMs == 500)
        #expect(settings.systemTTL == 30)
        #expect(settings.clampedLifetime(1) == .seconds(2))
        #expect(settings.clampedLifetime(10_000) == .seconds(600))
        try settings.validate()
    }

    @Test(arguments: [
        (DNSSettings(httpdns: "dns.example/resolve"), "httpdns"),
        (DNSSettings(timeoutMs: 0), "timeoutMs"),
        (DNSSettings(minTTL: 0), "minTTL"),
        (DNSSettings(minTTL: 10, maxTTL: 5), "maxTTL"),
        (DNSSettings(refreshAhead: 1.5), "refreshAhead"),
        (DNSSettings(maxConcurrentLookups: 0), "maxConcurrentLookups"),
    ])
    func rejectsOutOfRangeFieldsNamingThem(_ settings: DNSSettings, _ field: String) {
        do {
            try settings.validate()
            Issue.record("\(field) accepted")
        } catch {
            #expect(error.code == .invalidSettings)
            #expect(error.message.contains("dns.\(field)"))
        }
    }
}
