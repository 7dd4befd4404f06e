import HTTPTypes

/// What the service will request for one page open: the dry-run answer of `prefetch plan` and
/// `GET /v1/plan`, and the work list of a real prefetch.
public struct Plan: Sendable {
    /// The page URL as given.
    public var page: String
    /// The parsed page URL.
    public var pageURL: HTTPURL
    /// The config entry's `url` (an exact URL or a pattern).
    public var matched: String
    /// The config version the plan was made from.
    public var version: String
    /// The requests, in config order.
    public var requests: [PlannedRequest]
    /// Who may act on the page's data from a browser: its own origin and its config entry's partners.
    public var origins: PageOrigins

    /// Plans `page` against `config`.
    public static func make(page: String, config: PrefetchConfig) throws(PlanError) -> Plan {
        let url: HTTPURL
        do {
            url = try HTTPURL(parsing: page)
        } catch {
            throw PlanError.invalidPageURL(page: page, reason: error.message)
        }
        guard let match = config.matcher.match(url) else {
            throw PlanError.noMatch(page: page)
        }
        return Plan(
            page: page, pageURL: url, matched: match.entry.url, version: config.version,
            requests: Composer.compose(page: url, match: match),
            origins: PageOrigins(own: url.origin, partners: match.entry.partnerOrigins)
        )
    }

    /// The JSON shape documented for `prefetch plan --json`:
    /// `{"page","matched","version","requests":[{"name","api","method","url","headers":{},"body","needs":[]}]}`.
    public var json: JSONValue {
        .object(
            JSONObject([
                .init(name: "page", value: .string(page)),
                .init(name: "matched", value: .string(matched)),
                .init(name: "version", value: .string(version)),
                .init(name: "requests", value: .array(requests.map(\.json))),
            ]))
    }

    /// A human-readable listing of the requests.
    public var humanDescription: String {
        var lines = ["page     \(page)", "matched  \(matched)  (config version \(version))", ""]
        for (position, request) in requests.enumerated() {
            lines.append("\(position + 1). \(request.name)")
            // shown whole: `prefetch plan` is the operator's dry run at their own terminal; the URL is what they check.
            lines.append("   \(request.method.rawValue) \(request.url)")
            for header in request.headers { lines.append("   \(header.name.rawName): \(header.value)") }
            lines.append("   body: \(request.body ?? "(none)")")
            if !request.interface.references.isEmpty {
                let needs = request.interface.references.map {
                    "\($0.interface) \($0.pointer.text.isEmpty ? "(whole answer)" : $0.pointer.text)"
                }
                lines.append("   needs: \(needs.joined(separator: ", ")) (sent once those answers are in)")
            }
        }
        if requests.isEmpty { lines.append("(the page has no interfaces)") }
        return lines.joined(separator: "\n")
    }
}

extension PlannedRequest {
    /// `{"name","api","method","url","headers":{...},"body": <text or null>,"needs":[{"interface","pointer"}]}`.
    public var json: JSONValue {
        .object(
            JSONObject([
                .init(name: "name", value: .string(name)),
                .init(name: "api", value: .string(interface.api)),
                .init(name: "method", value: .string(method.rawValue)),
                .init(name: "url", value: .string(url)),
                .init(name: "headers", value: .object(JSONObject(headers.map { .init(name: $0.name.rawName, value: .string($0.value)) }))),
                .init(name: "body", value: body.map(JSONValue.string) ?? .null),
                .init(
                    name: "needs",
                    value: .array(
                        interface.references.map {
                            .object(
                                JSONObject([
                                    .init(name: "interface", value: .string($0.interface)),
                                    .init(name: "pointer", value: .string($0.pointer.text)),
                                ]))
                        })),
            ]))
    }
}

/// Why a page could not be planned.
public enum PlanError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The page URL is not an absolute http(s) URL the service accepts.
    case invalidPageURL(page: String, reason: String)
    /// No config entry matches the page.
    case noMatch(page: String)

    /// A stable code, safe as a metric label and an API error code.
    public var code: FailureCode {
        switch self {
        case .invalidPageURL: .invalidURL
        case .noMatch: .noConfig
        }
    }

    public var description: String {
        switch self {
        case .invalidPageURL(let page, let reason):
            "the page URL \(JSONValue.string(String(page.prefix(200))).jsonText) \(reason)"
        case .noMatch(let page):
            "no config entry matches the page \(JSONValue.string(String(page.prefix(200))).jsonText)"
        }
    }
}
