import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

/// A `prefetch-upstream` child process, stopped with SIGTERM.
final class UpstreamProcess: Sendable {
    let process: TestProcess
    let port: Int

    private init(process: TestProcess, port: Int) {
        self.process = process
        self.port = port
    }

    /// Starts the executable on port 0 and waits (at most 20 s) for its `listening on HOST:PORT` line.
    static func start() async throws -> UpstreamProcess {
        let url = try #require(builtExecutable("prefetch-upstream"), "prefetch-upstream executable not found next to the test bundle")
        let process = TestProcess()
        process.executableURL = url
        process.arguments = ["--host", "127.0.0.1", "--port", "0"]
        let output = Pipe()
        process.standardOutput = output
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        let buffer = Mutex([UInt8]())
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                continuation.finish()
                return
            }
            let line: String? = buffer.withLock { buffer in
                buffer.append(contentsOf: data)
                guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
                return String(decoding: buffer[..<newline], as: UTF8.self)
            }
            if let line {
                continuation.yield(line)
                continuation.finish()
            }
        }
        try launchSerially(process)
        let line = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                for await line in lines { return line }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            continuation.finish()
            return first
        }
        output.fileHandleForReading.readabilityHandler = nil
        guard let line, line.hasPrefix("listening on 127.0.0.1:"), let port = Int(line.dropFirst("listening on 127.0.0.1:".count)) else {
            process.terminate()
            throw UpstreamProcessError(message: "unexpected first line from prefetch-upstream: \(line ?? "<none>")")
        }
        return UpstreamProcess(process: process, port: port)
    }

    /// Sends SIGTERM and waits (at most 10 s) for the process to exit; returns its exit status, nil if it did not.
    func stop() async -> Int32? {
        process.terminate()
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            return nil
        }
        return process.terminationStatus
    }
}

struct UpstreamProcessError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

@Suite("prefetch-upstream executable", .timeLimit(.minutes(1)))
struct UpstreamExecutableTests {
    @Test func faultModesAndControlEndpointsOverTheExecutable() async throws {
        let upstream = try await UpstreamProcess.start()
        let base = "http://127.0.0.1:\(upstream.port)"
        do {
            try await withFetcher { fetcher in
                let first = try Echo(await fetcher.fetch(FetchRequest(url: "\(base)/e?setCookie=k%3Dv")))
                #expect(first.hit == 1)
                let second = try await fetcher.fetch(FetchRequest(url: "\(base)/e?setCookie=k%3Dv"))
                #expect(try Echo(second).hit == 2)
                #expect(second.headers.filter { $0.name.rawName == "Set-Cookie" }.map(\.value) == ["k=v"])

                let dripped = try await fetcher.fetch(FetchRequest(url: "\(base)/d?bytes=100&drip=5"))
                #expect(dripped.body.count == 100)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/f?reset=64")) == .reset)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/f?short=64")) == .reset)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/f?garbage=1")) == .protocol)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/f?hang=1", timeout: .milliseconds(300))) == .timeout)

                let hits = try await fetcher.fetch(FetchRequest(url: "\(base)/__hits?path=/e"))
                #expect(String(decoding: hits.body, as: UTF8.self) == #"{"path":"/e","hits":2}"#)
                let all = try await fetcher.fetch(FetchRequest(url: "\(base)/__hits"))
                #expect(String(decoding: all.body, as: UTF8.self).contains(#""/f":4"#))
                let reset = try await fetcher.fetch(FetchRequest(method: "POST", url: "\(base)/__reset"))
                #expect(reset.status == 200)
                let cleared = try await fetcher.fetch(FetchRequest(url: "\(base)/__hits?path=/e"))
                #expect(String(decoding: cleared.body, as: UTF8.self) == #"{"path":"/e","hits":0}"#)

                // A gate: a held request is still waiting when the gate is released over HTTP (it answered one), then answered.
                async let held = fetcher.fetch(FetchRequest(url: "\(base)/g?hold=door", timeout: .seconds(60)))
                let arrived = await eventually {
                    (try? await fetcher.fetch(FetchRequest(url: "\(base)/__hits?path=/g")))
                        .map { String(decoding: $0.body, as: UTF8.self) == #"{"path":"/g","hits":1}"# } ?? false
                }
                #expect(arrived)
                let release = try await fetcher.fetch(FetchRequest(method: "POST", url: "\(base)/__release?name=door"))
                #expect(String(decoding: release.body, as: UTF8.self) == #"{"released":"door","answered":1}"#)
                #expect(try await held.status == 200)
                let unnamed = try await fetcher.fetch(FetchRequest(method: "POST", url: "\(base)/__release"))
                #expect(unnamed.status == 400)
            }
        } catch {
            _ = await upstream.stop()
            throw error
        }
        let status = await upstream.stop()
        #expect(status == 0)
    }
}
