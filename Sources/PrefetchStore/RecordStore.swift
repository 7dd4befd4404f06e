/// Small records shared by every replica beside the responses (a ticket's record, so a page's read may land on any
/// replica): bytes under a name for a time, nothing more. No single flight, no identity, no labels: a record's name
/// is unguessable and written once.
public protocol RecordStore: Sendable {
    /// Keeps `bytes` under `name` for `ttl`, then calls `done` with whether the store took it (on the thread that has
    /// the answer: a Redis connection's event loop). Never suspends the caller. `done` must not block.
    func keepRecord(_ bytes: [UInt8], name: String, ttl: Duration, then done: @escaping @Sendable (Bool) -> Void)

    /// Calls `done` with the record under `name`, nil when there is none (never written, expired, or the store is
    /// unreachable), on the thread that has the answer (a Redis connection's event loop). Never suspends the caller.
    /// `done` must not block.
    func record(_ name: String, then done: @escaping @Sendable ([UInt8]?) -> Void)
}

extension RecordStore {
    /// ``keepRecord(_:name:ttl:then:)``, awaited.
    @discardableResult
    public func keepRecord(_ bytes: [UInt8], name: String, ttl: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            keepRecord(bytes, name: name, ttl: ttl) { continuation.resume(returning: $0) }
        }
    }

    /// ``record(_:then:)``, awaited.
    public func record(_ name: String) async -> [UInt8]? {
        await withCheckedContinuation { continuation in record(name) { continuation.resume(returning: $0) } }
    }
}
