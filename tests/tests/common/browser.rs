//! Debian's chromium, driven over the DevTools protocol, for the tests of `fairway
//! serve`'s page (host and docker cluster alike).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use headless_chrome::{Browser, Element, LaunchOptions, Tab};

/// A headless chromium (scripts/setup.sh installs it); no sandbox, as tests run as root.
pub fn chromium() -> Browser {
    Browser::new(
        LaunchOptions::default_builder()
            .path(Some(PathBuf::from("/usr/bin/chromium")))
            .sandbox(false)
            .window_size(Some((1500, 1000)))
            .idle_browser_timeout(Duration::from_secs(300))
            .build()
            .unwrap(),
    )
    .expect("chromium starts (scripts/setup.sh installs it)")
}

/// The first element `selector` matches, waiting up to `secs` for it.
pub fn wait<'a>(tab: &'a Tab, selector: &str, secs: u64) -> Element<'a> {
    tab.wait_for_element_with_custom_timeout(selector, Duration::from_secs(secs))
        .unwrap_or_else(|e| panic!("{selector} not on the page within {secs} s: {e:#}"))
}

/// What `expr` evaluates to in the page.
pub fn js(tab: &Tab, expr: &str) -> serde_json::Value {
    tab.evaluate(expr, false).expect("evaluates").value.unwrap_or_default()
}

/// Milliseconds since the epoch, as the page's `Date.now()` counts them.
pub fn unix_ms() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis()
}

/// A screenshot of the whole page into `$FAIRWAY_SCREENSHOTS/name` (or `fallback/name`).
pub fn screenshot(tab: &Tab, name: &str, fallback: Option<&std::path::Path>) {
    use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
    let dir = std::env::var_os("FAIRWAY_SCREENSHOTS").map(PathBuf::from).or(fallback.map(PathBuf::from));
    let Some(dir) = dir else { return };
    let png = tab.capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
}
