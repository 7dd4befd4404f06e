package import HTTPTypes
package import NIOCore
package import PrefetchStore

/// An answer of the page API, in no wire form: the response (its status and every field, final: length, CORS and
/// security headers included) and its body, handed to the transport that asked (the page pipeline encodes it as
/// HTTP/1.1). A stored response's replay carries the stored response itself, so its head is built only when the
/// transport has not kept it (``Head/replay(_:_:)``), and its body is the stored bytes, not a copy.
package struct PageAnswer: Sendable {
    package enum Head: Sendable {
        /// The response, final.
        case response(HTTPResponse)
        /// A stored response replayed to a reader of this kind: the head (``response``) is the same for every read of
        /// the same stored response by the same kind of reader, so a transport may keep it by the response's token and
        /// the variant.
        case replay(StoredResponse, ReplayVariant)
    }

    /// What a replay's head depends on besides the stored response: the `X-Prefetch` it says, and the CORS headers
    /// of the reader's origin.
    package struct ReplayVariant: Equatable, Sendable {
        package var joined: Bool
        package var origin: AllowedOrigins.Admission
    }

    // Fixed once made: a replay's length is its stored body's, and an answer to `HEAD` is never given a body.
    package let head: Head
    package let body: ByteBuffer
    /// An answer to `HEAD`: the head alone (its `Content-Length` the body's the `GET` answer has). Never a replay: the
    /// store's read routes refuse `HEAD` (a read is counted, a no-store answer consumed).
    package let headOnly: Bool

    package init(_ response: HTTPResponse, body: ByteBuffer, headOnly: Bool = false) {
        self.head = .response(response)
        self.body = body
        self.headOnly = headOnly
    }

    /// `stored` replayed to a reader of `variant`: ``PrefetchRoutes/replayParts(_:joined:)`` with the surface's final
    /// fields, built when ``response`` is asked for.
    package init(replaying stored: StoredResponse, _ variant: ReplayVariant) {
        self.head = .replay(stored, variant)
        self.body = stored.bodyBuffer
        self.headOnly = false
    }

    /// The response as it is written.
    package var response: HTTPResponse {
        switch head {
        case .response(let response):
            return response
        case .replay(let stored, let variant):
            let (status, fields, body) = PrefetchRoutes.replayParts(stored, joined: variant.joined)
            return HTTPResponse(
                status: status, headerFields: FastHandoff.finalFields(fields, length: body.readableBytes, origin: variant.origin))
        }
    }
}
