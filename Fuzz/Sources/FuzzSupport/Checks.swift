@testable import FuzzReference
import HTTPTypes
@testable import PrefetchCore

/// The invariants every plan keeps, whatever the page URL: what the README's parameter rules and SECURITY.md promise.
public enum PlanChecks {
    /// Checks `plan`, made for `page` against `config`: each request goes to its api's origin and path, carries only
    /// the config's headers (plus `Content-Type` for a body), keeps the values the config fixed, and is the request the
    /// reference composer makes from the same pairs.
    public static func check(_ plan: Plan, page: HTTPURL, config: PrefetchConfig) {
        guard let match = config.matcher.match(page) else {
            require(false, "a plan was made for \(page) but the matcher finds no entry")
            return
        }
        require(plan.matched == match.entry.url, "plan and matcher disagree on the entry for \(page)")
        require(plan.requests.count == match.entry.interfaces.count, "one request per interface")
        let captured = match.captures.map { QueryPair(capturedName: $0.name, value: $0.value) }
        let pairs = QueryPair.split(page.query) + captured
        let referencePairs = ReferenceComposer.splitByCharacters(page.query) + captured
        require(
            pairs.map(\.urlText) == referencePairs.map(\.urlText) && pairs.map(\.name) == referencePairs.map(\.name)
                && pairs.map(\.skeleton) == referencePairs.map(\.skeleton) && pairs.map(\.jsonValue) == referencePairs.map(\.jsonValue),
            "the byte query split differs from the Character split for \(page.query.debugDescription)")
        for (request, interface) in zip(plan.requests, match.entry.interfaces) {
            checkRequest(request, interface: interface)
            // The reference composer predates references and the config's `query` member.
            guard interface.references.isEmpty, interface.query.isEmpty else { continue }
            let reference = ReferenceComposer.compose(interface: interface, pairs: referencePairs)
            require(request.url == reference.url, "\(interface.name): url \(request.url.debugDescription) != reference \(reference.url.debugDescription)")
            require(request.body == reference.body, "\(interface.name): body differs from the reference composer's")
            require(
                request.headers.map(\.name.rawName) == reference.headers.map(\.name.rawName)
                    && request.headers.map(\.value) == reference.headers.map(\.value),
                "\(interface.name): headers differ from the reference composer's")
        }
    }

    /// What holds for one composed request.
    public static func checkRequest(_ request: PlannedRequest, interface: Interface) {
        // No header from page input: the config's, then Content-Type when there is a body.
        var expected = interface.headers
        if request.body != nil {
            expected.append(
                HTTPField(name: .contentType, value: interface.bodyType == .json ? "application/json" : "application/x-www-form-urlencoded"))
        }
        require(request.headers == expected, "\(interface.name): headers \(request.headers) are not the config's \(expected)")
        require(request.body == nil || interface.method.carriesBody, "\(interface.name): a \(interface.method) request has a body")
        // Where the request goes: the api's scheme, host, port and path, whatever the page sent.
        guard interface.references.isEmpty, request.url.utf8.count <= HTTPURL.maximumLength else { return }
        let url: HTTPURL
        do {
            url = try HTTPURL(parsing: request.url)
        } catch {
            require(false, "\(interface.name): composed url \(request.url.debugDescription) does not parse: \(error)")
            return
        }
        require(url.origin == interface.apiURL.origin, "\(interface.name): request origin \(url.origin) is not the api's \(interface.apiURL.origin)")
        require(url.path == interface.apiURL.path, "\(interface.name): request path \(url.path) is not the api's \(interface.apiURL.path)")
        require(url.fragment == nil, "\(interface.name): a composed url keeps a fragment")
        // The values the config fixed in a JSON body are the ones sent.
        if let body = request.body, interface.bodyType == .json {
            guard case .object(let sent)? = try? JSONParser.parse(body) else {
                require(false, "\(interface.name): the JSON body \(body.debugDescription) does not parse as an object")
                return
            }
            for member in interface.body.members {
                require(sent[member.name] == member.value, "\(interface.name): body member \(member.name) was overridden by the page")
            }
        }
    }
}

/// Reads the input as text the way the service gets it (a `String`: invalid UTF-8 becomes U+FFFD).
public func inputText(_ data: UnsafePointer<UInt8>?, _ size: Int) -> String {
    String(decoding: inputBytes(data, size), as: UTF8.self)
}
