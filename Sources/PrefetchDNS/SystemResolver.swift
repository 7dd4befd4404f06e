import NIOPosix
import PrefetchCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// getaddrinfo, kept off the cooperative pool.
///
/// getaddrinfo blocks and cannot be cancelled, so each call runs on a thread of a process-wide `NIOThreadPool`
/// kept for getaddrinfo (the project's one mechanism for blocking work, as `NIOThreadPool.singleton` is for files;
/// a pool of its own so that a stuck DNS server delays nothing else; started at the first lookup, never stopped,
/// like the singleton). The caller's continuation is resumed by whichever comes first: the answer, the timeout (a sleeping
/// child task) or task cancellation; a call that loses the race keeps its thread until getaddrinfo returns, and its
/// result is dropped. At most `maxBlocked` calls may hold a thread at once: beyond it lookups fail fast with
/// `.saturated` rather than queue behind stuck ones.
final class SystemResolver: Sendable {
    private let blocked = Atomic<Int>(0)
    let maxBlocked: Int

    init(maxBlocked: Int) {
        self.maxBlocked = max(1, maxBlocked)
    }

    /// The threads getaddrinfo runs on, shared by every resolver of the process (one in the service). Sixteen: the
    /// default `maxBlocked` (twice the default 8 concurrent lookups), so a lookup queues only behind stuck ones.
    static let threads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 16)
        pool.start()
        return pool
    }()

    /// The addresses of `host` (IPv4 and IPv6, in the system's preference order, duplicates removed).
    func lookup(_ host: String, timeout: Duration) async throws(DNSError) -> [String] {
        let pool = Self.threads
        let started = blocked.add(1, ordering: .relaxed).newValue
        guard started <= maxBlocked else {
            blocked.subtract(1, ordering: .relaxed)
            throw DNSError(
                code: .saturated,
                message: "system resolver lookup of \(host) not started: \(maxBlocked) lookups are still blocked"
            )
        }
        let once = ResumeOnce()
        let result: Result<[String], DNSError> = await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // The timeout; cancelled once the lookup is answered.
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                once.resume(.failure(DNSError(code: .timeout, message: "system resolver lookup of \(host) exceeded \(timeout)")))
            }
            let result = await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    once.install(continuation)
                    pool.submit { [self] state in
                        guard case .active = state else {
                            self.blocked.subtract(1, ordering: .relaxed)
                            once.resume(.failure(DNSError(code: .cancelled, message: "system resolver stopped before \(host)")))
                            return
                        }
                        let answer = Self.getaddrinfoBlocking(host)
                        self.blocked.subtract(1, ordering: .relaxed)
                        once.resume(answer)
                    }
                }
            } onCancel: {
                once.resume(.failure(DNSError(code: .cancelled, message: "system resolver lookup of \(host) cancelled")))
            }
            group.cancelAll()
            return result
        }
        return try result.get()
    }

    private static func getaddrinfoBlocking(_ host: String) -> Result<[String], DNSError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        // Only families this machine has a (non-loopback) address for: a pinned address must be reachable.
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0 else {
            let reason = String(cString: gai_strerror(status))
            return .failure(DNSError(code: .notFound, message: "system resolver could not resolve \(host): \(reason)"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var cursor = list
        while let info = cursor {
            if let address = Self.text(of: info.pointee), !addresses.contains(address) {
                addresses.append(address)
            }
            cursor = info.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(DNSError(code: .notFound, message: "system resolver returned no address for \(host)"))
        }
        return .success(addresses)
    }

    private static func text(of info: addrinfo) -> String? {
        guard let socketAddress = info.ai_addr else { return nil }
        switch info.ai_family {
        case AF_INET:
            return socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin_addr) { IPLiteral.render(Array($0), family: AF_INET) }
            }
        case AF_INET6:
            return socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { IPLiteral.render(Array($0), family: AF_INET6) }
            }
        default:
            return nil
        }
    }
}

/// A continuation resumed by exactly one of several racing parties; later resumes are ignored.
private final class ResumeOnce: Sendable {
    private enum State {
        case waiting
        case installed(CheckedContinuation<Result<[String], DNSError>, Never>)
        case early(Result<[String], DNSError>)
        case done
    }

    private let state = Mutex(State.waiting)

    func install(_ continuation: CheckedContinuation<Result<[String], DNSError>, Never>) {
        let early: Result<[String], DNSError>? = state.withLock { state in
            if case .early(let result) = state {
                state = .done
                return result
            }
            state = .installed(continuation)
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ result: Result<[String], DNSError>) {
        let continuation: CheckedContinuation<Result<[String], DNSError>, Never>? = state.withLock { state in
            switch state {
            case .waiting:
                // Cancelled before the continuation existed: remember the outcome for `install`.
                state = .early(result)
                return nil
            case .installed(let continuation):
                state = .done
                return continuation
            case .early, .done:
                return nil
            }
        }
        continuation?.resume(returning: result)
    }
}
