import Testing

@testable import PageAPI
@testable import PrefetchService

/// Which read a `GET` path names, as the fast path parses it on the path's bytes: the same routes the router's
/// table has (`/v1/data`, `/v1/prefetch/{ticket}`, `/v1/prefetch/{ticket}/data`), the ticket segment as sent; a path
/// outside ASCII is left to the router.
@Suite("read routes by path")
struct ReadRouteTests {
    enum Parsed: Equatable {
        case results(String), ticketData(String), pageData, none
    }

    func parse(_ path: String) -> Parsed {
        switch FastHandoff.ReadRoute(path[...]) {
        case .results(let id)?: .results(String(id))
        case .ticketData(let id)?: .ticketData(String(id))
        case .pageData?: .pageData
        case nil: .none
        }
    }

    @Test(arguments: [
        ("/v1/data", Parsed.pageData),
        ("/v1/prefetch/abc", .results("abc")),
        ("/v1/prefetch/abc/data", .ticketData("abc")),
        ("/v1/prefetch/a%20b/data", .ticketData("a%20b")),
        // Split at the `/` bytes, whatever the bytes between: a combining mark after `/` stays in the segment.
        ("/v1/prefetch/é", .results("é")),
        ("/v1/prefetch/日本/data", .ticketData("日本")),
        ("/v1/prefetch/\u{301}abc", .results("\u{301}abc")),
        ("/v1/data\u{301}", .none),
        ("/v1/prefetch/", .none),
        ("/v1/prefetch", .none),
        ("/v1/prefetch//data", .none),
        ("/v1/prefetch/a/b/data", .none),
        ("/v1/prefetch/a/data/", .none),
        ("/v1/prefetch/a/dat", .none),
        ("/v1/prefetch/a/datax", .none),
        ("/v1/prefetch/a/", .none),
        ("/v1/data/", .none),
        ("/v1/datax", .none),
        ("//v1/data", .none),
        ("/V1/data", .none),
    ])
    func aPathNamesOneReadOrNone(_ path: String, _ expected: Parsed) {
        #expect(parse(path) == expected, "\(path)")
    }

    /// A target as the page pipeline matches it: in origin form (an absolute-form target's path and query), its
    /// empty segments dropped, its query kept.
    @Test(arguments: [
        ("/v1/data?name=a", "/v1/data?name=a"),
        ("http://127.0.0.1:8080/healthz", "/healthz"),
        ("https://m.example.com/v1/prefetch/abc/data?name=a", "/v1/prefetch/abc/data?name=a"),
        ("http://127.0.0.1:8080", "/"),
        ("http://127.0.0.1:8080?x=1", "/?x=1"),
        ("//v1//data/?name=a", "/v1/data?name=a"),
        ("/", "/"),
        ("*", "*"),
    ])
    func aTargetIsMatchedInOriginFormWithoutEmptySegments(_ target: String, _ matched: String) {
        #expect(FastHandoffHandler.canonical(FastHandoffHandler.originForm(target)) == matched, "\(target)")
    }
}
