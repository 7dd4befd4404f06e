import PrefetchCore
import Testing

@Suite struct TraceContextTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func aValidTraceparentIsRead() throws {
        let parent = try #require(TraceParent(header: Self.valid))
        #expect(parent.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parent.parentID == "00f067aa0ba902b7")
        #expect(parent.flags == "01")
        #expect(parent.header == Self.valid)
    }

    @Test func aLaterVersionIsReadByItsFirstFieldsAndSentAsVersion00() throws {
        let parent = try #require(TraceParent(header: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"))
        #expect(parent.header == Self.valid)
    }

    @Test(arguments: [
        "", "00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 is exactly 55 characters
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff is invalid
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // uppercase
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero parent id
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",  // a field boundary moved
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // a later version continues only after a dash
    ])
    func anythingElseIsNoTraceContext(_ value: String) {
        #expect(TraceParent(header: value) == nil, "\(value)")
    }

    @Test func aChildKeepsTheTraceAndFlagsWithAFreshSpan() throws {
        let parent = try #require(TraceParent(header: Self.valid))
        var spans: Set<String> = []
        for _ in 0..<100 {
            let child = parent.child()
            #expect(child.traceID == parent.traceID && child.flags == parent.flags)
            #expect(child.parentID.count == 16 && child.parentID != parent.parentID)
            #expect(TraceParent(header: child.header) == child, "a child is itself a valid traceparent")
            spans.insert(child.parentID)
        }
        #expect(spans.count == 100, "span ids are random")
    }
}
