// Prints the document-start script PrefetchShell hands a webview for a page open: what a shell injects, so a
// harness driving a real browser (scripts/webshell-browser.py) injects exactly the SDK's script.
// Usage: prefetch-shell-script READ_KEY PAGE_URL
import Foundation
import PrefetchShell

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 2, let page = URL(string: arguments.last!), page.scheme != nil, page.host != nil else {
    FileHandle.standardError.write(Data("usage: prefetch-shell-script READ_KEY PAGE_URL (an absolute URL)\n".utf8))
    exit(2)
}
guard let script = ReadKeyScript.source(readKey: arguments.first!, page: page) else {
    FileHandle.standardError.write(Data("prefetch-shell-script: \(page) has no origin of its own; no document gets a key\n".utf8))
    exit(2)
}
print(script)
