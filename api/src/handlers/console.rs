//! `GET /ui`: the built-in web console (docs/CONSOLE.md), static files
//! compiled into the binary from `api/console/`.
//!
//! Invariants:
//! - The files are embedded with `include_str!`: no build step, nothing
//!   read from disk at run time, no file outside the fixed list is served
//!   (`/ui/<anything else>` is the API's 404/40400).
//! - Every answer carries [`CSP`]: scripts, styles and connections from
//!   this origin only (the console calls tidelog's own API and nothing
//!   else), no inline script or style, no frames, no plugins, no form
//!   posts; images only as `data:` (the empty favicon), so the browser
//!   never asks for `/favicon.ico`.
//! - Caching: the files change only with the binary, but keep one name
//!   across versions, so a browser may keep them and must revalidate
//!   (`no-cache` with an `ETag` of the content; a matching
//!   `If-None-Match` is 304 without a body).

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// What the console needs and nothing more (module doc).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_str!("../../console/index.html"),
};

/// The console's ES modules.
const fn script(name: &'static str, body: &'static str) -> Asset {
    Asset {
        name,
        content_type: "text/javascript; charset=utf-8",
        body,
    }
}

/// Every file `/ui/{file}` serves, besides [`STYLE`].
const ASSETS: [Asset; 5] = [
    INDEX,
    script("app.js", include_str!("../../console/app.js")),
    script("api.js", include_str!("../../console/api.js")),
    script("view.js", include_str!("../../console/view.js")),
    script("plot.js", include_str!("../../console/plot.js")),
];

const STYLE: Asset = Asset {
    name: "style.css",
    content_type: "text/css; charset=utf-8",
    body: include_str!("../../console/style.css"),
};

/// `GET /ui` and `GET /ui/`: the page.
pub async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

/// `GET /ui/{file}`: a script or the stylesheet; 404/40400 otherwise.
pub async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .chain(std::iter::once(&STYLE))
        .find(|a| a.name == file)
        .map(|a| serve(a, &headers))
        .ok_or_else(|| ApiError::NotFound {
            message: format!("the console has no file {file:?}"),
        })
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let etag = etag(asset.body);
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    let matches = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    if matches {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    (StatusCode::OK, headers, asset.body).into_response()
}

/// A strong validator of `body`: its 64-bit FNV-1a hash, quoted.
fn etag(body: &str) -> String {
    let hash = body.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_files_the_console_serves() {
        // Every script and stylesheet the page and the modules name is in
        // the list, so a renamed file cannot 404 in the field.
        let names: Vec<&str> = ASSETS
            .iter()
            .chain(std::iter::once(&STYLE))
            .map(|a| a.name)
            .collect();
        for asset in ASSETS.iter() {
            for quoted in asset.body.split(['"', '\'']) {
                let Some(file) = quoted
                    .strip_prefix("/ui/")
                    .or_else(|| quoted.strip_prefix("./"))
                else {
                    continue;
                };
                if file.ends_with(".js") || file.ends_with(".css") {
                    assert!(names.contains(&file), "{} names {file}", asset.name);
                }
            }
        }
    }

    #[test]
    fn no_asset_parses_data_as_html() {
        // The console's escaping rule (docs/CONSOLE.md): data reaches the
        // page through text nodes only.
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!asset.body.contains(sink), "{} uses {sink}", asset.name);
            }
        }
    }
}
