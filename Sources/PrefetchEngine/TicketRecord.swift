import PrefetchStore

/// A ticket as shared between replicas (JSON in the shared store). It holds key digests, never composed URLs.
struct TicketRecord: Codable, Sendable {
    struct Request: Codable, Sendable {
        var name: String
        var api: String
        var method: String
        var identity: String
        var request: String
        var ttlMs: Int64
        var negativeTTLMs: Int64
        var timeoutMs: Int64
    }

    var id: String
    var page: String
    var pageOrigin: String
    /// The page entry's `partnerOrigins`; absent when it names none (and in records written before them).
    var partnerOrigins: [String]?
    var matched: String
    var version: String
    /// `active` or `candidate`; absent in records written before canary configs.
    var role: String?
    var identity: String
    var createdAtMs: Int64
    var expiresAtMs: Int64
    var requests: [Request]

    /// The record name of ticket `id` in the shared ``RecordStore``.
    static func name(_ id: String) -> String {
        "ticket:" + id
    }
}
