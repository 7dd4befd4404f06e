import Foundation
public import HTTPTypes
public import NIOCore

/// The answer to `GET /v1/resources/blob/{sha256}`, decided without I/O: the status, the headers and the bytes.
///
/// Bodies are immutable (the name is their hash), so every found body is `Cache-Control: public, max-age=31536000,
/// immutable` with `ETag: "<sha256>"`; an `If-None-Match` naming it (or `*`) is a `304`; one `Range: bytes=a-b`
/// (also `a-` and `-n`) is a `206` with `Content-Range`, one past the end a `416`. Several ranges, or a range in
/// another unit, get the whole body (RFC 9110 lets a server ignore `Range`).
public struct BlobAnswer: Sendable {
    /// What happened, a bounded metric label.
    public enum Outcome: String, Sendable, CaseIterable {
        case hit, notModified = "not-modified", partial, unsatisfiable, notFound = "not-found", badHash = "bad-hash"
    }

    public var outcome: Outcome
    public var status: HTTPResponse.Status
    public var headers: HTTPFields
    /// The body: the blob, a part of it, or an error's JSON (`{"error","message"}`, as the rest of the API).
    public var body: ByteBuffer

    /// The answer for `hash` given the stored body (`blob`, nil when unknown) and the request's headers.
    static func decide(hash: String, blob: (bytes: ByteBuffer, ctype: String)?, ifNoneMatch: String?, range: String?) -> BlobAnswer {
        guard Digests.isSHA256(hash) else {
            return error(
                .badHash, .badRequest, code: "bad-hash",
                message: "the blob name \"\(String(hash.prefix(80)))\" is not a SHA-256 (64 lowercase hex digits)")
        }
        guard let blob else {
            return error(.notFound, .notFound, code: "not-found", message: "no resource body has the SHA-256 \(hash)")
        }
        let etag = "\"\(hash)\""
        var headers: HTTPFields = [
            .cacheControl: "public, max-age=31536000, immutable", .eTag: etag, .acceptRanges: "bytes",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        if let ifNoneMatch, matches(ifNoneMatch, etag: etag) {
            return BlobAnswer(outcome: .notModified, status: .notModified, headers: headers, body: ByteBuffer())
        }
        headers[.contentType] = blob.ctype
        let size = blob.bytes.readableBytes
        switch range.map({ parseRange($0, size: size) }) ?? .whole {
        case .whole:
            return BlobAnswer(outcome: .hit, status: .ok, headers: headers, body: blob.bytes)
        case .part(let lower, let upper):
            headers[.contentRange] = "bytes \(lower)-\(upper)/\(size)"
            let part = blob.bytes.getSlice(at: blob.bytes.readerIndex + lower, length: upper - lower + 1) ?? ByteBuffer()
            return BlobAnswer(outcome: .partial, status: .partialContent, headers: headers, body: part)
        case .unsatisfiable:
            var answer = error(
                .unsatisfiable, .rangeNotSatisfiable, code: "range-not-satisfiable",
                message: "the Range is outside the body's \(size) bytes")
            answer.headers[.contentRange] = "bytes */\(size)"
            return answer
        }
    }

    private static func error(_ outcome: Outcome, _ status: HTTPResponse.Status, code: String, message: String) -> BlobAnswer {
        let body = "{\"error\":\(json(code)),\"message\":\(json(message))}"
        return BlobAnswer(outcome: outcome, status: status, headers: [.contentType: "application/json"], body: ByteBuffer(string: body))
    }

    private static func json(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\u00" + (scalar.value < 16 ? "0" : "") + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func matches(_ header: String, etag: String) -> Bool {
        header.split(separator: ",").contains { tag in
            let trimmed = tag.trimmingCharacters(in: .whitespaces)
            return trimmed == "*" || trimmed == etag || trimmed == "W/" + etag
        }
    }

    enum RangeChoice: Equatable {
        case whole
        case part(Int, Int)
        case unsatisfiable
    }

    /// One `bytes=` range against a body of `size` bytes (inclusive bounds).
    static func parseRange(_ header: String, size: Int) -> RangeChoice {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return .whole }
        let spec = text.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            // A suffix: the last n bytes.
            guard let count = Int(last), count >= 0 else { return .whole }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .part(max(0, size - count), size - 1)
        }
        guard let lower = Int(first), lower >= 0 else { return .whole }
        guard lower < size else { return .unsatisfiable }
        if last.isEmpty { return .part(lower, size - 1) }
        guard let upper = Int(last), upper >= lower else { return .whole }
        return .part(lower, min(upper, size - 1))
    }
}
