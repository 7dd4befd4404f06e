import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP socket bound to a free port of 127.0.0.1 and not listening: while it is open, the port is this test's and
/// every connection to it is refused.
public final class BoundLocalPort: Sendable {
    public let port: Int
    private let descriptor: Int32

    /// Binds port 0 and reads back the kernel's choice; nil when the system refuses a socket.
    public init?() {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        close(descriptor)
    }
}

/// Every port ``unusedLocalPort()`` handed out in this process: never handed out twice, so two servers a test
/// process starts side by side (tests run in parallel) are never told the same port.
private let handedOut = Mutex<Set<Int>>([])

/// A port nothing listens on right now: one a ``BoundLocalPort`` held and gave back, and never handed out before in
/// this process (the kernel may choose a port again once it is given back). A server started on it may still meet
/// another process's that took it meanwhile: hold a ``BoundLocalPort`` where that matters, or check who answers
/// (`RedisServer.launch`).
public func unusedLocalPort() -> Int? {
    for _ in 0..<256 {
        guard let port = BoundLocalPort()?.port else { return nil }
        if handedOut.withLock({ $0.insert(port).inserted }) { return port }
    }
    return nil
}
