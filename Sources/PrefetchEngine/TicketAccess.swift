public import Foundation
public import PrefetchCore
public import PrefetchStore

/// A short-lived capability to read one ticket's data from one origin: what a shell hands its page (through a
/// JS bridge or an injected value, never a URL) when the page cannot present the user's credentials itself.
///
/// Wire form: URL-safe base64 of a random nonce (8 bytes), the expiry (8 bytes, Unix milliseconds, big endian),
/// the ticket id masked with a keystream derived from the nonce and expiry (16 bytes), and the first 16 bytes of
/// an HMAC-SHA256 over nonce, expiry, ticket id and the page's origin. The key does not reveal the ticket (a page
/// holding a key never holds the ticket, which outlives the key), and it is checked without any state of its own,
/// so every replica sharing the deployment's identity key accepts it.
public struct ReadKey: Sendable {
    /// The key as the page presents it (`X-Prefetch-Key`).
    public var value: String
    /// When it stops being accepted.
    public var expiresAt: Date
}

/// Who may read a ticket's responses.
///
/// - A ticket triggered without credentials holds only anonymous (shareable) responses: its id suffices.
/// - A ticket triggered with credentials answers a reader presenting the same credentials, or a reader holding
///   a valid read key for it from the page's origin. A reader with no credentials gets `credentials-required`,
///   one with other credentials `identity-mismatch`.
public enum TicketAccess {
    /// The header a page presents its read key in.
    public static let readKeyHeader = "X-Prefetch-Key"

    static let macLength = 16
    static let encodedLength = 8 + 8 + 16 + macLength

    /// Checks that a reader presenting `presented` may read `ticket` by identity.
    public static func authorize(_ ticket: Ticket, presented: Identity) throws(PrefetchError) {
        if ticket.identity == .anonymous || presented == ticket.identity { return }
        throw presented == .anonymous ? .credentialsRequired : .identityMismatch
    }

    /// Where a browser says a request comes from.
    public enum RequestOrigin: Sendable, Equatable {
        /// The `Origin` header.
        case header(String)
        /// A same-origin request (browsers send no `Origin` on a same-origin GET, but `Sec-Fetch-Site:
        /// same-origin`): the page is on the service's own host, the request's authority.
        case sameOrigin(authority: String)
        /// Nothing a browser would send: not a page.
        case unknown

        /// Reads the request headers as a browser sets them.
        public init(origin: String?, fetchSite: String?, authority: String?) {
            if let origin {
                self = .header(origin)
            } else if fetchSite?.lowercased() == "same-origin", let authority {
                self = .sameOrigin(authority: authority.lowercased())
            } else {
                self = .unknown
            }
        }

        /// Whether this is `origin` (`scheme://host[:port]`, lowercase).
        func matches(_ origin: String) -> Bool {
            switch self {
            case .header(let value): return value.lowercased() == origin
            case .sameOrigin(let authority):
                guard let range = origin.range(of: "://") else { return false }
                return origin[range.upperBound...] == authority
            case .unknown: return false
            }
        }

        /// Whether this is the page's own origin or one of its partners.
        func isAny(of origins: PageOrigins) -> Bool {
            matches(origins.own) || origins.partners.contains { matches($0) }
        }

        var shown: String? {
            if case .header(let value) = self { return value }
            return nil
        }
    }
}

extension Orchestrator {
    /// A read key for `ticket`, valid for ``ServiceSettings/readKeyLifetime`` or the ticket's life if shorter.
    func readKey(for ticket: Ticket) -> ReadKey {
        let lifetime = min(settings.readKeyLifetime, ticket.expiresAt - clock.now)
        let expiresMs = Int64(Date().timeIntervalSince1970 * 1000) + max(0, lifetime.milliseconds)
        let nonce = RandomID.randomBytes(8)
        let expiry = Self.bigEndian(expiresMs)
        let id = Base64URL.decode(ticket.id) ?? []
        let mask = keyMask(nonce: nonce, expiry: expiry)
        var bytes = nonce + expiry
        bytes += zip(id, mask).map { $0 ^ $1 }
        bytes += readKeyMAC(nonce: nonce, expiry: expiry, ticketID: id, origin: ticket.pageOrigin)
        return ReadKey(value: Base64URL.encode(bytes), expiresAt: Date(timeIntervalSince1970: Double(expiresMs) / 1000))
    }

    private static func bigEndian(_ value: Int64) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    private func keyMask(nonce: [UInt8], expiry: [UInt8]) -> [UInt8] {
        Array(settings.identityKey.mac(domain: "prefetch-read-key-mask-v2", [nonce, expiry]).prefix(16))
    }

    private func readKeyMAC(nonce: [UInt8], expiry: [UInt8], ticketID: [UInt8], origin: String) -> [UInt8] {
        Array(
            settings.identityKey.mac(domain: "prefetch-read-key-v2", [nonce, expiry, ticketID, Array(origin.utf8)]).prefix(
                TicketAccess.macLength))
    }

    /// The ticket a read key opens, for a request from `origin`.
    public func ticket(forReadKey text: String, origin: TicketAccess.RequestOrigin) async throws(PrefetchError) -> Ticket {
        let key = try openReadKey(text)
        return try check(key, ticket: await tickets.ticket(Base64URL.encode(key.id)), origin: origin)
    }

    /// ``ticket(forReadKey:origin:)`` without I/O, for the event loop: the ticket the key opens for a request from
    /// `origin`, or why it opens none, with its ticket found by `lookUp` (``TicketRegistry/lookUp(_:)``, or tickets
    /// a caller already fetched); `.elsewhere(id)` when the key names a ticket this replica does not hold but another
    /// may (fetch it, then ask again).
    public func ticket(forReadKey text: String, origin: TicketAccess.RequestOrigin, lookUp: (String) -> TicketLookup) -> ReadKeyLookup {
        let key: OpenedReadKey
        do {
            key = try openReadKey(text)
        } catch {
            return .opened(.failure(error))
        }
        let held: Ticket?
        switch lookUp(Base64URL.encode(key.id)) {
        case .found(let ticket): held = ticket
        case .unknown: held = nil
        case .elsewhere(let id): return .elsewhere(id)
        }
        do {
            return .opened(.success(try check(key, ticket: held, origin: origin)))
        } catch {
            return .opened(.failure(error))
        }
    }

    private struct OpenedReadKey {
        var nonce: [UInt8]
        var expiry: [UInt8]
        var id: [UInt8]
        var mac: [UInt8]
    }

    private func openReadKey(_ text: String) throws(PrefetchError) -> OpenedReadKey {
        guard let bytes = Base64URL.decode(text), bytes.count == TicketAccess.encodedLength else {
            throw .invalidReadKey(reason: "it is malformed")
        }
        let nonce = Array(bytes[0..<8])
        let expiry = Array(bytes[8..<16])
        let expiresMs = expiry.reduce(Int64(0)) { $0 << 8 | Int64($1) }
        let id = zip(bytes[16..<32], keyMask(nonce: nonce, expiry: expiry)).map { $0 ^ $1 }
        guard expiresMs > Int64(Date().timeIntervalSince1970 * 1000) else { throw .invalidReadKey(reason: "it has expired") }
        return OpenedReadKey(nonce: nonce, expiry: expiry, id: id, mac: Array(bytes[32...]))
    }

    private func check(_ key: OpenedReadKey, ticket: Ticket?, origin: TicketAccess.RequestOrigin) throws(PrefetchError) -> Ticket {
        guard let ticket,
            constantTimeEqual(key.mac, readKeyMAC(nonce: key.nonce, expiry: key.expiry, ticketID: key.id, origin: ticket.pageOrigin))
        else {
            throw .invalidReadKey(reason: "it was not issued by this service, or its ticket has expired")
        }
        guard origin.isAny(of: ticket.origins) else { throw .originMismatch(origin: origin.shown) }
        return ticket
    }

    /// Whether a reader may read `ticket`: the one entitlement rule of every route that reads a ticket, on either
    /// pipeline. Its request must come from the page's own origin or a partner (``authorize(_:for:)``), and it must
    /// present either a read key for this very ticket (`readKeyOpens`: the ticket the key it sent opens, or why it
    /// opens none; the caller resolves the key on this replica or any) or the identity the ticket was fetched for
    /// (`presented`).
    public func entitle(
        _ ticket: Ticket, origin: TicketAccess.RequestOrigin, presented: Identity, readKeyOpens: Result<Ticket, PrefetchError>?
    ) throws(PrefetchError) {
        try authorize(origin, for: ticket.origins)
        if let readKeyOpens {
            guard try readKeyOpens.get().id == ticket.id else { throw .invalidReadKey(reason: "it was issued for another ticket") }
        } else {
            try TicketAccess.authorize(ticket, presented: presented)
        }
    }

    /// Checks that a browser request from `origin` may trigger, or read the data of, a page that `page` names the
    /// origins of: a request with an `Origin` must come from the page's own origin, one of its config entry's
    /// `partnerOrigins`, or a `--cors-origin` the operator listed; being the origin of some other page of the
    /// config is not enough. A same-origin request (`Sec-Fetch-Site: same-origin`, no `Origin`) comes from a page
    /// on the host it is addressed to, which must be the page's own host or a partner's. A request a browser
    /// marks neither way (a native shell) passes; the page guard has refused cross-site embeds already.
    public func authorize(_ origin: TicketAccess.RequestOrigin, for page: PageOrigins) throws(PrefetchError) {
        switch origin {
        case .unknown: return
        case .header(let value):
            if origin.isAny(of: page) || trustedOrigins.contains(value.lowercased()) { return }
            throw .pageOriginNotAllowed(origin: value, page: page.own)
        case .sameOrigin(let authority):
            if origin.isAny(of: page) { return }
            throw .pageOriginNotAllowed(origin: "a page on \(authority) (same-origin)", page: page.own)
        }
    }
}

/// What a read key opens, as far as this replica can tell without I/O.
public enum ReadKeyLookup: Sendable {
    /// Its ticket, or why it opens none.
    case opened(Result<Ticket, PrefetchError>)
    /// The key names a ticket held elsewhere, if anywhere: fetch it (its id), then ask again.
    case elsewhere(String)
}

/// Compares two byte strings in time that depends only on their lengths.
public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for index in a.indices { difference |= a[index] ^ b[index] }
    return difference == 0
}
