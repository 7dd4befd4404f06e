import Foundation
package import HTTPTypes
package import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import Synchronization

/// The static files under `Resources/web`, read once.
package enum WebFiles {
    package struct File: Sendable {
        package var bytes: [UInt8]
        package var contentType: String
        package var etag: String
    }

    package static let files: [String: File] = {
        guard let root = Bundle.module.url(forResource: "web", withExtension: nil) else { return [:] }
        var files: [String: File] = [:]
        for name in ["client.js", "ui.html", "demo/shell.html", "demo/page.html"] {
            guard let data = try? Data(contentsOf: root.appendingPathComponent(name)) else { continue }
            let bytes = Array(data)
            let type = name.hasSuffix(".js") ? "application/javascript; charset=utf-8" : "text/html; charset=utf-8"
            files[name] = File(bytes: bytes, contentType: type, etag: "\"\(fnv1a(bytes))\"")
        }
        return files
    }()

    /// The file `name` as an answer: `200` with its bytes, `304` when `ifNoneMatch` is its `ETag`.
    package static func parts(_ name: String, ifNoneMatch: String?) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        guard let file = files[name] else {
            return (.notFound, [.contentType: "text/plain; charset=utf-8"], ByteBuffer(string: "\(name) is missing from this build\n"))
        }
        var headers: HTTPFields = [
            .eTag: file.etag, .cacheControl: name.hasSuffix(".js") ? "public, max-age=300" : "no-cache",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        if ifNoneMatch == file.etag { return (.notModified, headers, ByteBuffer()) }
        headers[.contentType] = file.contentType
        return (.ok, headers, ByteBuffer(bytes: file.bytes))
    }

    /// A 64-bit FNV-1a hash in hex: a content fingerprint for the ETag, not a security measure.
    package static func fnv1a(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}
