/*
 * Prefetch page client: one call that uses the prefetched response when there is one and otherwise makes the
 * page's own request, so a page never breaks because of the prefetch service.
 *
 *   <script src="https://prefetch.example.com/v1/client.js"></script>
 *   const response = await PrefetchClient.get('https://m.example.com/api/info', {method: 'GET'});
 *   const data = await response.json();      // response.prefetch = {source: 'hit'|'joined'|'miss', reason, via}
 *
 * Two ways to read, chosen per call (never a ticket in a URL):
 * Both send page=<this page's URL>, as the service's document requires.
 * - With a read key (options.readKey, else window.__PREFETCH_READ_KEY__ set by the shell's JS bridge, else
 *   sessionStorage 'prefetchReadKey'): GET /v1/data with the key in the X-Prefetch-Key header and no cookies.
 *   The service accepts the key only from the page's own origin. For a service on another site.
 * - Without: GET /v1/data with the page's own cookies (credentials: 'include'), page= locating the data. For a
 *   service on the page's site, where the browser sends it the user's cookies.
 * The service is the origin this script was loaded from (PrefetchClient.base to change it). Any miss, error,
 * slow answer (PrefetchClient.timeout ms beyond the wait) or unreachable service falls back to the page's own
 * request, fetch(options.url || api, options.init), with two limits: options.url must be on api's own origin
 * (the interface's host, never another), and neither may be this service's own API (base + /v1/...): a page that
 * takes its api from its URL must not become a tool that reads the user's prefetched data with their cookies.
 */
(function (global) {
  'use strict';

  var script = global.document && global.document.currentScript;
  var client = {
    base: script && script.src ? new URL(script.src).origin : global.location.origin,
    /** The sessionStorage item a shell bridge may leave the read key in. */
    readKeyItem: 'prefetchReadKey',
    /** Milliseconds the service may take beyond the wait before the page makes its own request. */
    timeout: 500,
    /** Called with every report: {api, name, source, reason, via ('read-key' or 'credentials'), ms}. */
    onReport: null,
    /** The last 50 reports, oldest first. */
    reports: []
  };

  /** The read key for this page open, or null. */
  client.readKey = function (options) {
    if (options && options.readKey) return options.readKey;
    if (global.__PREFETCH_READ_KEY__) return global.__PREFETCH_READ_KEY__;
    try { return global.sessionStorage.getItem(client.readKeyItem); } catch (ignored) { return null; }
  };

  function report(api, options, source, reason, via, started) {
    var entry = {api: api, name: options.name || null, source: source, reason: reason || null, via: via,
      ms: Math.round(performance.now() - started)};
    client.reports.push(entry);
    if (client.reports.length > 50) client.reports.shift();
    if (typeof client.onReport === 'function') {
      try { client.onReport(entry); } catch (ignored) { /* a broken hook must not break the page */ }
    }
    return entry;
  }

  /** Asks the service for the prefetched response; resolves {response} or {reason} and never rejects. */
  function askService(api, options) {
    var query = new URLSearchParams({api: api, method: (options.method || 'GET').toUpperCase()});
    if (options.name) query.set('name', options.name);
    if (options.wait != null) query.set('wait', String(options.wait));
    var key = client.readKey(options);
    var via = key ? 'read-key' : 'credentials';
    var init = {cache: 'no-store'};
    query.set('page', global.location.href);
    if (key) {
      init.credentials = 'omit';
      init.headers = {'X-Prefetch-Key': key};
    } else {
      init.credentials = 'include';
    }
    var controller = new AbortController();
    init.signal = controller.signal;
    // Without a wait the service waits up to the interface's timeout (3 s by default): cap it at 3 s.
    var timer = setTimeout(function () { controller.abort(); },
      (options.wait != null ? Number(options.wait) : 3000) + client.timeout);
    return fetch((options.base || client.base) + '/v1/data?' + query, init).then(function (response) {
      clearTimeout(timer);
      var served = response.headers.get('X-Prefetch');
      if (served === 'hit' || served === 'joined') return {response: response, source: served, via: via};
      return {reason: response.headers.get('X-Prefetch-Reason') || 'status-' + response.status, via: via};
    }, function (error) {
      clearTimeout(timer);
      return {reason: error && error.name === 'AbortError' ? 'timeout' : 'service-down', via: via};
    });
  }

  /** The page's own request for api: options.url on api's origin, or api; null for anything else. */
  function ownRequest(api, options) {
    var target, interfaceURL, service;
    try {
      interfaceURL = new URL(api, global.location.href);
      target = new URL(options.url || api, global.location.href);
      service = new URL((options.base || client.base) + '/v1/', global.location.href);
    } catch (ignored) { return null; }
    if (target.origin !== interfaceURL.origin) return null;
    // Repeated slashes name the same route to the service (`//v1/data` is `/v1/data`).
    var path = target.pathname.replace(/\/{2,}/g, '/');
    if (target.origin === service.origin && path.indexOf(service.pathname.replace(/\/{2,}/g, '/')) === 0) return null;
    return target.href;
  }

  /**
   * The page's response for `api` (the interface URL as written in the prefetch config).
   * options: method, name, wait (ms the service may wait for an in-flight fetch), readKey, base,
   * url (the URL of the page's own request when it differs from api), init (the page's own fetch init).
   * Resolves a Response with .prefetch = {source, reason}; rejects only when the page's own fetch does.
   */
  client.get = function (api, options) {
    options = options || {};
    var started = performance.now();
    var init = Object.assign({method: options.method || 'GET'}, options.init || {});
    var own = function (reason, via) {
      var entry = report(api, options, 'miss', reason, via, started);
      var target = ownRequest(api, options);
      if (!target) return Promise.reject(new TypeError('PrefetchClient: no own request to ' + (options.url || api) +
        ': it must be on the origin of ' + api + ' and not the prefetch service\'s own API'));
      return fetch(target, init).then(function (response) {
        response.prefetch = {source: 'miss', reason: entry.reason, via: via};
        return response;
      });
    };
    return askService(api, options).then(function (answer) {
      if (!answer.response) return own(answer.reason, answer.via);
      report(api, options, answer.source, null, answer.via, started);
      answer.response.prefetch = {source: answer.source, reason: null, via: answer.via};
      return answer.response;
    });
  };

  global.PrefetchClient = client;
})(window);
