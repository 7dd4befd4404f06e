public import PrefetchStore

extension RedisStore: RecordStore {
    /// See `RecordStore.keepRecord`: `SET <ns>:r:<name> <bytes> PX <ttl>` on a pooled connection. While Redis is
    /// away the record is not kept (`done(false)`): other replicas cannot read it, as they could not reach it anyway.
    public func keepRecord(_ bytes: [UInt8], name: String, ttl: Duration, then done: @escaping @Sendable (Bool) -> Void) {
        let expiry = milliseconds(ttl)
        let command = [Array("SET".utf8), Array(keySpace.record(name).utf8), bytes, Array("PX".utf8), Array(String(expiry).utf8)]
        pool.submit(batch: [command]) { replies in
            if case .success(.status)? = replies.first { done(true) } else { done(false) }
        }
    }

    /// See `RecordStore.record(_:then:)`: `GET <ns>:r:<name>` on a pooled connection.
    public func record(_ name: String, then done: @escaping @Sendable ([UInt8]?) -> Void) {
        pool.submit(batch: [[Array("GET".utf8), Array(keySpace.record(name).utf8)]]) { replies in
            if case .success(.string(let bytes))? = replies.first { done(bytes) } else { done(nil) }
        }
    }
}
