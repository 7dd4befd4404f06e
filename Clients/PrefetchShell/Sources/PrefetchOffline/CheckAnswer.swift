import Foundation

/// What a check of the map learned, from the provider (`GET /v1/resources?version=V`) or the CDN mirror: the
/// envelope `{"code":200,"data":{"version","update","resourcemap","removed"}}` classified once, here.
enum CheckAnswer: Sendable, Equatable {
    /// A normal answer: the map's current version, and the map when the answer carries one.
    case normal(version: String, map: ResourceMap?)
    /// An abnormal answer, which counts towards the switch to the mirror.
    case abnormal(Abnormal)

    /// Why an answer was abnormal (a bounded reason).
    enum Abnormal: String, Sendable, Equatable {
        /// No answer: the connection failed or timed out.
        case transport
        /// An HTTP status other than 200.
        case httpStatus = "http-status"
        /// The envelope's `code` was not 200.
        case code
        /// Not the envelope, or `update: true` without a map.
        case badAnswer = "bad-answer"
    }

    /// Classifies an HTTP answer (`status`, `body`).
    static func classify(status: Int, body: Data) -> CheckAnswer {
        guard status == 200 else { return .abnormal(.httpStatus) }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: body) else { return .abnormal(.badAnswer) }
        guard envelope.code.text == "200" else { return .abnormal(.code) }
        guard let data = envelope.data else { return .abnormal(.badAnswer) }
        // A mirror's file may leave `update` out: a map that is there is an answer with a map.
        let update = data.update ?? (data.resourcemap != nil)
        guard update else { return .normal(version: data.version.text, map: nil) }
        guard let entries = data.resourcemap else { return .abnormal(.badAnswer) }
        return .normal(version: data.version.text, map: ResourceMap(version: data.version.text, entries: entries))
    }

    private struct Envelope: Decodable {
        var code: LenientText
        var data: Payload?
    }

    // `removed` is left out: the SDK derives what to delete from the maps themselves (the one rule of deletion),
    // so a provider that forgets `V` and answers only the full map deletes the same things.
    private struct Payload: Decodable {
        var version: LenientText
        var update: Bool?
        var resourcemap: [String: ResourceEntry]?
    }
}
