public import PrefetchCore

/// Why a fetch produced no response. `code` is drawn from a small fixed vocabulary, safe as a metric label.
public struct StoreFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why: a fetch's code (`timeout`, `dns`, `connect`, `tls`, `reset`, `too-large`, `protocol`, ...), `upstream-5xx`,
    /// `private`, a dependent's (`dependency-failed`, ...), or the store's own: `too-large` when a response cannot
    /// fit even in an empty store, `store-full` when in-flight entries (never evicted) hold the room it needs.
    public var code: FailureCode
    /// A human explanation naming the offending input.
    public var message: String

    /// Creates a failure.
    public init(code: FailureCode, message: String) {
        self.code = code
        self.message = message
    }

    /// A `description` of the form `code: message`.
    public var description: String { "\(code): \(message)" }

    /// The bytes this failure counts against a store budget.
    var accountedBytes: Int { code.rawValue.utf8.count + message.utf8.count }
}

/// An invalidation could not reach every copy: a shared store's backend was unreachable. What could be dropped
/// (this process's copies) was dropped; the caller should try again.
public struct StoreUnavailable: Error, Sendable, Hashable, CustomStringConvertible {
    /// What could not be reached, never a credential.
    public var message: String

    /// Creates the error.
    public init(message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
