// The thin WebKit layer over the platform-neutral core: a document-start user script and a cookie-store sync.
// Compiled only where WebKit exists (iOS, macOS); Linux CI builds and tests everything else.
#if canImport(WebKit)
public import WebKit

extension PrefetchShell {
    /// Adds the script that hands `open`'s read key to the page (``documentStartScript(for:)``) to `controller`, at
    /// document start in the main frame. Call it before loading the page in the webview that uses `controller`.
    /// User scripts stay for every later navigation of that webview: the script sets the key only in a document of
    /// the page's origin, and a shell that reuses the webview removes it (`removeAllUserScripts()`) before the next open.
    @MainActor
    public func installReadKey(for open: PageOpen, in controller: WKUserContentController) async {
        guard let source = await documentStartScript(for: open) else { return }
        controller.addUserScript(WKUserScript(source: source, injectionTime: .atDocumentStart, forMainFrameOnly: true))
    }

    /// Writes the cookies the page's upstreams set (``cookiesToSync(for:names:existing:)``) into the webview's cookie
    /// store, under the hosts of the requests that set them; the store's own cookies are passed, so an insecure
    /// response cannot shadow a `Secure` one.
    @MainActor
    public func syncCookies(for open: PageOpen, into store: WKHTTPCookieStore) async {
        let existing = await store.allCookies()
        for cookie in await cookiesToSync(for: open, existing: existing) {
            await store.setCookie(cookie)
        }
    }
}
#endif
