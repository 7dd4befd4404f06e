package import CoreMetrics
package import HTTPTypes
package import NIOCore
package import PrefetchCore
package import PrefetchEngine
import PrefetchStore

/// Invalidation: stored responses that must not be handed out for the rest of their TTL.
///
/// - Page surface, `POST /v1/invalidate`: the caller's own identity, from the credentials its request presents
///   (`Cookie`, `Authorization`: the service's credential headers). What a shell calls on logout. It can only
///   ever reach the presenting identity: never another one, never the shared anonymous entries. Without
///   credentials, `401 credentials-required`.
/// - Operator surface, `POST /v1/store/invalidate`: every identity's entries of one interface, or every response
///   an upstream tagged with a surrogate key (`Surrogate-Key`).
///
/// Both answer `{"dropped": n}`; flights in progress are not touched (their waiters still get the result).
package struct InvalidationRoutes: Sendable {
    package let prefetch: PrefetchRoutes
    package let metrics: InvalidationMetrics

    package init(prefetch: PrefetchRoutes, metrics: InvalidationMetrics) {
        self.prefetch = prefetch
        self.metrics = metrics
    }

    /// Largest operator request body.
    package static let maximumOperatorBody = 4096

    /// What both routes answer.
    package struct Dropped: JSONAnswer, Codable {
        package var dropped: Int
    }

    package var orchestrator: Orchestrator { prefetch.orchestrator }

    /// `POST /v1/invalidate`: the caller's own entries, by the credentials its request presents (`headers`); the
    /// body is empty or `{}`.
    package func invalidateCaller(headers: HTTPFields, body: ByteBuffer) async throws(APIError) -> Dropped {
        let object = body.readableBytes == 0 ? JSONObject() : try PrefetchRoutes.jsonObject(body)
        if let member = object.members.first {
            throw APIError.badRequest(
                .badJSON,
                "unknown member \(quoted(member.name, limit: 60)); the body is empty or {}: the credentials are the request's own headers"
            )
        }
        let credentials = orchestrator.credentials(in: headers)
        guard credentials.identity != .anonymous else {
            orchestrator.metrics.denied(PrefetchError.credentialsRequired.code.rawValue)
            throw APIError(
                status: .unauthorized, code: PrefetchError.credentialsRequired.code,
                message: "an invalidation drops the caller's own prefetched responses: present its credentials (Cookie or Authorization)",
                isMiss: true)
        }
        return try await invalidate(.identity) { () async throws(StoreUnavailable) -> Int in
            try await orchestrator.invalidate(identity: credentials.identity)
        }
    }

    /// The operator's invalidation of every identity's entries of the interface `name`.
    package func invalidate(interface name: String) async throws(APIError) -> Dropped {
        try await invalidate(.interface) { () async throws(StoreUnavailable) -> Int in try await orchestrator.invalidate(label: name) }
    }

    /// The operator's invalidation of every response an upstream tagged with the surrogate key `key`.
    package func invalidate(surrogateKey key: String) async throws(APIError) -> Dropped {
        try await invalidate(.surrogateKey) { () async throws(StoreUnavailable) -> Int in
            try await orchestrator.invalidate(surrogateKey: key)
        }
    }

    /// Runs one invalidation and counts it; an unreachable shared store is `503 store-unavailable`.
    func invalidate(
        _ scope: InvalidationMetrics.Scope, _ body: () async throws(StoreUnavailable) -> Int
    ) async throws(APIError) -> Dropped {
        do {
            let dropped = try await body()
            metrics.record(scope, dropped: dropped)
            return Dropped(dropped: dropped)
        } catch {
            throw APIError(
                status: .serviceUnavailable, code: .storeUnavailable, message: "the invalidation is incomplete: \(error.message)",
                retryAfter: 1)
        }
    }

    package static func refuseUnknownMembers(_ object: JSONObject, known: Set<String>) throws(APIError) {
        if let unknown = object.members.first(where: { !known.contains($0.name) }) {
            let expected = known.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            throw APIError.badRequest(
                .badJSON, "unknown member \(quoted(unknown.name, limit: 60)); the body may hold only \(expected)")
        }
    }

    /// An interface name as the config spells them: 1-64 of `A-Za-z0-9._-`.
    package static func interfaceName(_ value: JSONValue) throws(APIError) -> String {
        guard case .string(let name) = value else {
            throw APIError.badRequest(.badInterface, "\"interface\" must be a string, got \(value.kindName)")
        }
        let valid =
            (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
        guard valid else {
            throw APIError.badRequest(
                .badInterface, "interface \(quoted(name, limit: 80)) is not an interface name (1-64 of A-Za-z0-9._-)")
        }
        return name
    }

    /// A surrogate key as upstreams tag responses with: 1-256 bytes of visible ASCII.
    package static func surrogateKey(_ value: JSONValue) throws(APIError) -> String {
        guard case .string(let key) = value else {
            throw APIError.badRequest(.badSurrogateKey, "\"surrogateKey\" must be a string, got \(value.kindName)")
        }
        guard SurrogateKeys.isValid(key) else {
            throw APIError.badRequest(
                .badSurrogateKey,
                "surrogateKey \(quoted(key, limit: 80)) is not a surrogate key (1-\(SurrogateKeys.maximumBytes) bytes of visible ASCII, no spaces)"
            )
        }
        return key
    }
}

/// `prefetch_invalidations_total{scope}` (invalidations done) and `prefetch_invalidated_entries_total{scope}`
/// (stored values they dropped), `scope` one of `identity`, `interface`, `surrogate_key`.
package final class InvalidationMetrics: Sendable {
    package enum Scope: String, CaseIterable, Sendable {
        case identity
        case interface
        case surrogateKey = "surrogate_key"
    }

    private let invalidations: [Scope: Counter]
    private let entries: [Scope: Counter]

    package init(factory: any MetricsFactory) {
        var invalidations: [Scope: Counter] = [:]
        var entries: [Scope: Counter] = [:]
        for scope in Scope.allCases {
            invalidations[scope] = Counter(
                label: "prefetch_invalidations_total", dimensions: [("scope", scope.rawValue)], factory: factory)
            entries[scope] = Counter(
                label: "prefetch_invalidated_entries_total", dimensions: [("scope", scope.rawValue)], factory: factory)
        }
        self.invalidations = invalidations
        self.entries = entries
    }

    package func record(_ scope: Scope, dropped: Int) {
        invalidations[scope]?.increment()
        entries[scope]?.increment(by: Int64(dropped))
    }
}
