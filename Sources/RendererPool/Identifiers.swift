import PrefetchCore

/// A renderer's identifier, assigned by its pool (`<profile>-<n>`) and stable for the renderer's whole life.
public struct RendererID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let value: String

    public static func < (lhs: RendererID, rhs: RendererID) -> Bool { lhs.value < rhs.value }

    public init(_ value: String) {
        self.value = value
    }

    public init(stringLiteral value: String) {
        self.value = value
    }

    public var description: String { value }
}

/// A lease's identifier: the capability to release or destroy a leased renderer, so drawn from the system
/// generator (128 random bits as unpadded base64url: 22 characters of `A-Za-z0-9-_`, `RandomID`).
public struct LeaseID: Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let value: String

    /// A lease id as a caller presented it, or nil when it cannot be one (not 22 base64url characters).
    public init?(presented text: String) {
        guard RandomID.isWellFormed(text) else { return nil }
        self.value = text
    }

    public init(stringLiteral value: String) {
        self.value = value
    }

    private init(value: String) {
        self.value = value
    }

    /// A new, unguessable lease id.
    static func random() -> LeaseID {
        LeaseID(value: RandomID.make())
    }

    public var description: String { value }
}
