import ConfigUpdater
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PageAPI
import PrefetchCore
import PrefetchEngine
import Synchronization

/// The operator surface's config endpoints: `GET /v1/config` (what is loaded, from where, how the checks go),
/// `POST /v1/config/refresh` (check the source now), `POST /v1/config/canary/promote` and
/// `POST /v1/config/canary/rollback` (end a canary rollout), and `GET /v1/plan` (the dry run of a page open).
///
/// Refreshes are throttled whatever the source: a URL source by the updater's fatigue window, and every source
/// (a file too, whose re-validation costs CPU) to one refresh per ``minimumRefreshInterval`` from this API;
/// refreshes inside it answer `throttled` with what is loaded, without checking.
struct ConfigRoutes: Sendable {
    let updater: ConfigUpdater?
    let orchestrator: Orchestrator
    let source: String
    /// The operator listener's body timeout.
    let bodyTimeout: Duration
    let lastRefresh = RefreshThrottle()

    static let minimumRefreshInterval: Duration = .seconds(1)

    /// The answer of `GET /v1/config` for a fixed config (given in code): no checks happen.
    struct FixedStatus: Codable, Sendable {
        var name: String?
        var version: String?
        var source: String
        var active: String
        var ready: Bool
    }

    struct RefreshAnswer: Codable, Sendable {
        var outcome: String
        var coalesced: Bool
        var errors: [String]
        var status: ConfigStatus
    }

    var routes: RouteCollection<BasicRequestContext> {
        let router = RouteCollection(context: BasicRequestContext.self)
        router.get("/v1/config") { _, _ -> Response in
            guard let updater else {
                let loaded = orchestrator.currentConfig()
                let status = FixedStatus(
                    name: loaded?.name, version: loaded?.version, source: source, active: loaded == nil ? "none" : "primary",
                    ready: loaded != nil)
                return try JSONEncoding.response(loaded == nil ? .serviceUnavailable : .ok, status)
            }
            return try JSONEncoding.response(.ok, updater.status())
        }
        router.post("/v1/config/refresh") { request, _ -> Response in
            let buffer = try await readBody(request, limit: 4096, timeout: bodyTimeout)
            var trigger = RefreshTrigger.manual
            if buffer.readableBytes > 0 {
                guard case .object(let object)? = try? JSONParser.parse(Array(buffer.readableBytesView)) else {
                    throw APIError.badRequest(.badJSON, "the body must be a JSON object like {\"trigger\": \"page_open\"}")
                }
                switch object["trigger"] {
                case nil: break
                case .string(let text)?:
                    guard let parsed = RefreshTrigger(rawValue: text) else {
                        let known = RefreshTrigger.allCases.map(\.rawValue).joined(separator: ", ")
                        throw APIError.badRequest(.badTrigger, "trigger \(quoted(text, limit: 40)) is not one of \(known)")
                    }
                    trigger = parsed
                case .some(let other):
                    throw APIError.badRequest(.badTrigger, "\"trigger\" must be a string, got \(other.kindName)")
                }
            }
            guard let updater else {
                throw APIError(
                    status: .conflict, code: .fixedConfig, message: "this service runs a fixed config; there is no source to check")
            }
            if !lastRefresh.admit(interval: Self.minimumRefreshInterval, now: orchestrator.clock.now) {
                return try JSONEncoding.response(
                    .ok, RefreshAnswer(outcome: "throttled", coalesced: false, errors: [], status: updater.status()))
            }
            let result = await updater.refresh(trigger: trigger)
            return try JSONEncoding.response(
                .ok,
                RefreshAnswer(
                    outcome: result.outcome.rawValue, coalesced: result.coalesced, errors: result.errors.map(\.message),
                    status: result.status))
        }
        router.post("/v1/config/canary/promote") { request, _ -> Response in
            try await canaryDecision(request, promote: true)
        }
        router.post("/v1/config/canary/rollback") { request, _ -> Response in
            try await canaryDecision(request, promote: false)
        }
        router.get("/v1/plan") { request, _ -> Response in
            guard let page = request.uri.queryParameters.get("url") else {
                throw APIError.badRequest(.missingURL, "the query parameter url (the page URL) is required")
            }
            do throws(PrefetchError) {
                let plan = try orchestrator.plan(page: page)
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: plan.json.jsonText)))
            } catch {
                throw APIError(error)
            }
        }
        return router
    }
}

extension ConfigRoutes {
    /// Promotes or rolls back the canary candidate and answers the new status. The body is empty or `{}` (the
    /// decision takes no parameters; anything else is a 400, as the document says); `409 no-canary` when no
    /// candidate is served, `409 fixed-config` without a source.
    func canaryDecision(_ request: Request, promote: Bool) async throws -> Response {
        let buffer = try await readBody(request, limit: 4096, timeout: bodyTimeout)
        if buffer.readableBytes > 0 {
            guard case .object(let object)? = try? JSONParser.parse(Array(buffer.readableBytesView)) else {
                throw APIError.badRequest(.badJSON, "the body must be empty or a JSON object")
            }
            if let member = object.members.first {
                throw APIError.badRequest(
                    .badJSON, "unknown member \(quoted(member.name, limit: 60)); the body is empty or {}: the decision takes no parameters")
            }
        }
        guard let updater else {
            throw APIError(
                status: .conflict, code: .fixedConfig, message: "this service runs a fixed config; there is no canary to change")
        }
        let status: ConfigStatus
        do throws(CanaryActionError) {
            status = try await promote ? updater.promoteCanary() : updater.rollbackCanary()
        } catch {
            throw APIError(status: error.code == .notReady ? .serviceUnavailable : .conflict, code: error.code, message: error.message)
        }
        return try JSONEncoding.response(.ok, status)
    }
}

/// The instant of the last refresh this API started.
final class RefreshThrottle: Sendable {
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    /// Whether a refresh may start now (none started within `interval`); records it when so.
    func admit(interval: Duration, now: ContinuousClock.Instant) -> Bool {
        last.withLock { last in
            if let previous = last, now - previous < interval { return false }
            last = now
            return true
        }
    }
}
