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
