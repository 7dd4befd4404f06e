import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore
import RendererPool

/// Renderer profiles: the `renderers` file (`configs/renderers.json` by default).
///
/// ```json
/// {"renderers": {"main": {"minIdle": 2, "maxSize": 8}, "plain": {"minIdle": 1, "maxSize": 4}}}
/// ```
/// Every profile field is optional (see ``RendererProfile`` and the README for the defaults). Without a file
/// the service runs the two default profiles: `main` (first-party pages) and `plain` (third-party pages).
public enum RendererSettings {
    /// The profiles used when no renderers file exists.
    public static var defaultProfiles: [String: RendererProfile] {
        var main = RendererProfile()
        main.minIdle = 2
        main.maxSize = 8
        var plain = RendererProfile()
        plain.minIdle = 1
        plain.maxSize = 4
        return ["main": main, "plain": plain]
    }

    /// A renderers file that could not be used, with every problem.
    public struct LoadError: Error, CustomStringConvertible {
        public var path: String
        public var problems: [String]
        public var description: String { "invalid renderers file \(path): " + problems.joined(separator: "; ") }
    }

    /// Reads and validates the profiles in `path`.
    public static func load(path: String) throws(LoadError) -> [String: RendererProfile] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LoadError(path: path, problems: ["cannot read the file"])
        }
        struct File: Decodable { var renderers: [String: RendererProfile] }
        let profiles: [String: RendererProfile]
        do {
            profiles = try JSONDecoder().decode(File.self, from: data).renderers
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context), let DecodingError.keyNotFound(_, context),
            let DecodingError.dataCorrupted(context)
        {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw LoadError(path: path.isEmpty ? "(root)" : String(path.dropFirst()), problems: ["\(path.isEmpty ? "" : String(path.dropFirst()) + ": ")\(context.debugDescription)"])
        } catch {
            throw LoadError(path: path, problems: ["\(error)"])
        }
        if profiles.isEmpty { throw LoadError(path: path, problems: ["renderers: at least one profile is required"]) }
        let problems = profiles.keys.sorted().flatMap { profiles[$0]!.problems(path: "renderers.\($0)") }
        if !problems.isEmpty { throw LoadError(path: path, problems: problems) }
        return profiles
    }
}

/// The renderer pool endpoints and `POST /v1/open`.
struct RendererAPI: Sendable {
    let pools: RendererPools
    let prefetch: PrefetchAPI

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.post("/v1/renderers/acquire") { request, _ in
            await prefetch.respond { () async throws(APIError) in
                let object = try await prefetch.jsonBody(request)
                let profile = try string(object, "profile") ?? "main"
                let page = try string(object, "page")
                return jsonResponse(.ok, try await acquire(profile: profile, page: page))
            }
        }
        router.post("/v1/renderers/:id/release") { request, context in
            await prefetch.respond { () async throws(APIError) in
                let object = try await prefetch.jsonBody(request, allowEmpty: true)
                var healthy = true
                switch object["healthy"] {
                case nil: break
                case .bool(let flag): healthy = flag
                case .some(let other): throw APIError.badRequest("bad-json", "\"healthy\" must be true or false, got \(other.kindName)")
                }
                let id = context.parameters.get("id") ?? ""
                for pool in pools.pools.values where await pool.release(id: id, healthy: healthy) {
                    return jsonResponse(.ok, JSON.object([("id", .string(id)), ("released", .bool(true)), ("healthy", .bool(healthy))]))
                }
                throw APIError(status: .notFound, code: "unknown-lease", message: "the lease \(JSON.quote(id, limit: 80)) is unknown, already released or reclaimed")
            }
        }
        router.get("/v1/renderers") { _, _ in
            jsonResponse(.ok, await snapshotJSON())
        }
        router.post("/v1/open") { request, _ in
            await prefetch.respond { () async throws(APIError) in try await open(request) }
        }
    }

    func string(_ object: JSONObject, _ name: String) throws(APIError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case .some(let other): throw APIError.badRequest("bad-json", "\"\(name)\" must be a string, got \(other.kindName)")
        }
    }

    /// Leases a renderer; the JSON answer of `/v1/renderers/acquire`.
    func acquire(profile: String, page: String?) async throws(APIError) -> JSONValue {
        guard pools.pool(named: profile) != nil else {
            let known = pools.pools.keys.sorted().joined(separator: ", ")
            throw APIError(status: .notFound, code: "unknown-profile", message: "no renderer profile named \(JSON.quote(profile, limit: 60)) (profiles: \(known))")
        }
        do {
            let lease = try await pools.acquire(profile: profile, page: page)
            return JSON.object([
                ("id", .string(lease.id)), ("profile", .string(lease.profile)), ("warm", .bool(lease.warm)),
                ("waitedMs", JSON.int64(lease.waited.milliseconds)), ("createMs", JSON.int64(lease.createTime.milliseconds)),
                ("uses", JSON.int(lease.uses)),
            ])
        } catch {
            switch error.code {
            case .timeout: throw APIError(status: .serviceUnavailable, code: "timeout", message: "no \(profile) renderer became free in time: \(error.message)")
            case .shutdown: throw APIError(status: .serviceUnavailable, code: "shutdown", message: "the service is shutting down")
            default: throw APIError(status: .serviceUnavailable, code: "create-failed", message: "no \(profile) renderer could be created: \(error.message)")
            }
        }
    }

    func snapshotJSON() async -> JSONValue {
        let snapshots = await pools.snapshot()
        let profiles = snapshots.keys.sorted().map { name -> (String, JSONValue) in
            let s = snapshots[name]!
            let number = { (value: Double) -> JSONValue in .number(String(format: "%.1f", value)) }
            return (name, JSON.object([
                ("idle", JSON.int(s.idle)), ("leased", JSON.int(s.leased)), ("warming", JSON.int(s.warming)),
                ("pending", JSON.int(s.pending)), ("created", JSON.int(s.created)), ("destroyed", JSON.int(s.destroyed)),
                ("warmHits", JSON.int(s.warmHits)), ("coldStarts", JSON.int(s.coldStarts)), ("timeouts", JSON.int(s.timeouts)),
                ("reclaimed", JSON.int(s.reclaimed)), ("createFailures", JSON.int(s.createFailures)), ("memoryMB", JSON.int(s.memoryMB)),
                ("acquireWaitMs", JSON.object([("p50", number(s.acquireWaitMs.p50)), ("p90", number(s.acquireWaitMs.p90)), ("p99", number(s.acquireWaitMs.p99)), ("samples", JSON.int(s.acquireWaitMs.samples))])),
            ]))
        }
        return JSON.object([("profiles", JSON.object(profiles))])
    }

    /// A tap in one round trip: trigger the page's prefetch and lease a renderer, concurrently.
    ///
    /// The profile defaults to `main` for pages in the prefetch config (first-party pages) and `plain` for
    /// others; each half answers its result or its own error, so a page without config still gets a renderer.
    func open(_ request: Request) async throws(APIError) -> Response {
        let object = try await prefetch.jsonBody(request)
        guard case .string(let page)? = object["url"] else {
            throw APIError.badRequest("missing-url", object["url"] == nil ? "\"url\" (the page URL) is required" : "\"url\" must be a string")
        }
        let headers = try prefetch.credentialHeaders(object, request: request)
        let known = (try? prefetch.orchestrator.plan(page: page)) != nil
        let profile = try string(object, "profile") ?? (known ? "main" : "plain")
        async let lease = { () async -> Result<JSONValue, APIError> in
            do throws(APIError) { return .success(try await acquire(profile: profile, page: page)) } catch { return .failure(error) }
        }()
        let ticket: Result<JSONValue, APIError>
        do throws(APIError) {
            ticket = .success(prefetch.ticketJSON(try await prefetch.orchestrator.trigger(page: page, headers: headers)))
        } catch {
            if error.code == "invalid-url" { throw error }
            ticket = .failure(error)
        }
        let renderer = await lease
        func part(_ result: Result<JSONValue, APIError>) -> JSONValue {
            switch result {
            case .success(let value): value
            case .failure(let error): error.json
            }
        }
        var members: [(String, JSONValue)] = []
        switch ticket {
        case .success(let value): members += [("prefetch", value), ("prefetchError", .null)]
        case .failure(let error): members += [("prefetch", .null), ("prefetchError", part(.failure(error)))]
        }
        switch renderer {
        case .success(let value): members += [("renderer", value), ("rendererError", .null)]
        case .failure(let error): members += [("renderer", .null), ("rendererError", part(.failure(error)))]
        }
        return jsonResponse(.ok, JSON.object(members))
    }
}
