import Foundation
import NIOPosix
import PrefetchCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What identifies one version of a file on disk: a change of any part means the file changed.
struct FileSignature: Sendable, Hashable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modifiedSeconds: Int64
    var modifiedNanoseconds: Int64
}

/// Blocking file work (stat, read, fsync), and the validation of what was read, on NIO's shared thread pool
/// (`NIOThreadPool`, the project's one mechanism for blocking work), so the cooperative pool never blocks:
/// validating a 10,000-page config takes tens of milliseconds. The updater runs one check at a time, so nothing
/// here needs ordering.
struct BlockingFileIO: Sendable {
    private let pool = NIOThreadPool.singleton

    private func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        // The shared pool is never shut down, so it is always active; the fallback keeps the signature total.
        (try? await pool.runIfActive(body)) ?? body()
    }

    /// Runs CPU-heavy work (a config's validation) off the cooperative pool.
    func compute<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await run(body)
    }

    /// The file's signature, or `nil` when it cannot be stat'ed (missing, unreadable directory).
    func signature(of path: String) async -> FileSignature? {
        await run { Self.statSignature(path) }
    }

    /// The whole file, at most `ConfigLoader.maximumBytes`.
    func readContents(_ path: String) async -> Result<[UInt8], ConfigCheckError> {
        await run { Self.readFile(path) }
    }

    /// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename, fsync of the
    /// directory. Creates the directory when missing. Returns a message on failure.
    func writeAtomically(_ bytes: [UInt8], to path: String, directory: String) async -> String? {
        await run { Self.atomicWrite(bytes, to: path, directory: directory) }
    }

    static func statSignature(_ path: String) -> FileSignature? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        return FileSignature(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modifiedSeconds: Int64(modified.tv_sec), modifiedNanoseconds: Int64(modified.tv_nsec))
    }

    static func readFile(_ path: String) -> Result<[UInt8], ConfigCheckError> {
        func failure(_ what: String) -> Result<[UInt8], ConfigCheckError> {
            .failure(ConfigCheckError(code: .unreadable, source: path, message: "\(path): \(what)"))
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return failure("cannot open: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return failure("cannot stat: \(String(cString: strerror(errno)))") }
        if (info.st_mode & S_IFMT) == S_IFDIR { return failure("is a directory") }
        if Int(info.st_size) > ConfigLoader.maximumBytes {
            return failure("is \(info.st_size) bytes; the limit is \(ConfigLoader.maximumBytes) bytes")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return failure("cannot read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            // A file growing while read is still bounded.
            if bytes.count > ConfigLoader.maximumBytes {
                return failure("is more than \(ConfigLoader.maximumBytes) bytes")
            }
        }
        return .success(bytes)
    }

    static func atomicWrite(_ bytes: [UInt8], to path: String, directory: String) -> String? {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            return "cannot create the state directory \(directory): \(error.localizedDescription)"
        }
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return "cannot create \(temporary): \(String(cString: strerror(errno)))" }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                write(descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                let message = "cannot write \(temporary): \(String(cString: strerror(errno)))"
                close(descriptor)
                unlink(temporary)
                return message
            }
            written += count
        }
        if fsync(descriptor) != 0 {
            let message = "cannot fsync \(temporary): \(String(cString: strerror(errno)))"
            close(descriptor)
            unlink(temporary)
            return message
        }
        close(descriptor)
        if rename(temporary, path) != 0 {
            let message = "cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))"
            unlink(temporary)
            return message
        }
        // The rename is durable only once the directory entry is.
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
        return nil
    }
}
