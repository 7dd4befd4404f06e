/// Identifies one stored response (a ``StoredResponse`` and every copy of it) for readers that keep what they
/// derived from it, such as the page listener's encoded answer heads: two tokens are the same response when they are
/// the same object (`===`). A change to the response's status, headers or body gives it a new token, so nothing
/// derived from the old bytes is taken for the new.
///
/// It is not part of the response's value: equality and hashing ignore it (every token equals every other).
public final class ResponseToken: Sendable, Hashable {
    public init() {}

    public static func == (lhs: ResponseToken, rhs: ResponseToken) -> Bool { true }
    public func hash(into hasher: inout Hasher) {}
}
