/// Fetches waiting for a transfer slot, admitted fairly across groups (a group is one page open).
///
/// Each group keeps its own FIFO; the next fetch admitted comes from the group admitted least recently (a group
/// never admitted before goes first, ties by arrival), so one page's burst of requests cannot hold back another
/// page's: with one slot free and page A's 30 requests queued ahead of page B's one, B's goes next. A value type
/// with no clock and no I/O, tested on its own.
struct AdmissionQueue<Element> {
    private struct Group {
        var items: [Element] = []
        var head = 0
        /// The admission count when this group last had a fetch admitted; -1 for never.
        var lastAdmitted = -1
        /// When the group's current backlog began (arrival order), for ties.
        var arrival: Int

        var count: Int { items.count - head }
    }

    private var groups: [String: Group] = [:]
    private var admissions = 0
    private var arrivals = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Queues `element` at the back of `group`'s line.
    mutating func append(_ element: Element, group: String) {
        arrivals += 1
        groups[group, default: Group(arrival: arrivals)].items.append(element)
        count += 1
    }

    /// Puts `element` back at the front of `group`'s line (a fetch being retried keeps its place).
    mutating func prepend(_ element: Element, group: String) {
        arrivals += 1
        var line = groups[group, default: Group(arrival: arrivals)]
        if line.head > 0 {
            line.head -= 1
            line.items[line.head] = element
        } else {
            line.items.insert(element, at: 0)
        }
        groups[group] = line
        count += 1
    }

    /// The next element to admit, removed from the queue.
    mutating func popNext() -> Element? {
        guard count > 0 else { return nil }
        var chosen: String?
        var best: (Int, Int) = (.max, .max)
        for (name, group) in groups where group.count > 0 {
            let rank = (group.lastAdmitted, group.arrival)
            if rank < best {
                best = rank
                chosen = name
            }
        }
        guard let name = chosen, var group = groups[name] else { return nil }
        let element = group.items[group.head]
        group.head += 1
        admissions += 1
        group.lastAdmitted = admissions
        count -= 1
        if group.count == 0 {
            // An idle group is forgotten; if it comes back it starts a new backlog.
            groups[name] = nil
        } else {
            if group.head > 64 && group.head * 2 > group.items.count {
                group.items.removeFirst(group.head)
                group.head = 0
            }
            groups[name] = group
        }
        return element
    }

    /// Removes every element for which `shouldRemove` is true, keeping the order of the rest. `shouldRemove` is
    /// called exactly once per element (it may act on the elements it removes).
    mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        guard count > 0 else { return }
        for name in Array(groups.keys) {
            guard var group = groups[name] else { continue }
            var kept: [Element]?
            for index in group.head..<group.items.count {
                let element = group.items[index]
                if shouldRemove(element) {
                    if kept == nil { kept = Array(group.items[group.head..<index]) }
                    count -= 1
                } else {
                    kept?.append(element)
                }
            }
            guard let kept else { continue }
            if kept.isEmpty {
                groups[name] = nil
                continue
            }
            group.items = kept
            group.head = 0
            groups[name] = group
        }
    }

    /// The smallest `key` of any queued element (no allocation).
    func minimum<Key: Comparable>(of key: (Element) -> Key) -> Key? {
        var result: Key?
        for group in groups.values {
            for element in group.items[group.head...] {
                let value = key(element)
                if result.map({ value < $0 }) ?? true { result = value }
            }
        }
        return result
    }

    /// Every queued element, in no particular order.
    var elements: [Element] {
        groups.values.flatMap { $0.items[$0.head...] }
    }

    /// Empties the queue, returning what it held.
    mutating func drain() -> [Element] {
        let all = elements
        groups.removeAll()
        count = 0
        return all
    }
}
