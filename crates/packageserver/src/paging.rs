//! `limit` and `continue` on LIST, as the Kubernetes API server pages.
//!
//! A continue token is opaque to clients: unpadded URL-safe base64 of
//! `{"v":"meta.k8s.io/v1","gen":"<content generation>","start":[...]}`, where
//! `start` is the sort position of the last item returned and `gen` the
//! [`Snapshot::generation`](crate::store::Snapshot::generation) of the
//! visible content when the first page was served. A continuation is served
//! only while that generation is current, so every page comes from the same
//! content: paging is consistent. Once the content changed, the token is
//! refused with `410 Expired` as the API server refuses a compacted one, and
//! the refusal carries a fresh token for the rest of the list (an
//! inconsistent continuation, which the client may choose). The generation
//! is a digest of the content, not a per-replica counter, so a token issued
//! by one replica is honoured by another that holds the same catalogs — the
//! aggregator sends each page to any replica.
//!
//! A malformed token or a `limit` that is not a number is a `400 BadRequest`.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::store::SortKey;

/// The version tag of a continue token (the API server's own).
pub const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Upper bound on a continue token's length; longer ones are refused
/// before decoding.
pub const MAX_CONTINUE_BYTES: usize = 4096;

/// The API server's message for a continue token of content that changed.
pub const EXPIRED_MESSAGE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Token {
    v: String,
    #[serde(rename = "gen")]
    generation: String,
    start: SortKey,
}

/// What a LIST asks for of paging.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// Most items to return; `None` for all.
    pub limit: Option<usize>,
    /// Where the previous page ended, and of which generation.
    after: Option<Token>,
}

/// Why a page cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PagingError {
    /// `400 BadRequest` with this message.
    BadRequest(String),
    /// `410 Expired`: the content changed since the first page; `continue`
    /// resumes from the same position in the current content.
    Expired {
        /// A token for the rest of the current content.
        continue_token: String,
    },
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// The token for the next page; `None` on the last page.
    pub continue_token: Option<String>,
    /// How many items follow this page (`None` on the last page).
    pub remaining: Option<usize>,
}

/// Encodes a continue token.
pub fn encode(generation: &str, start: &SortKey) -> String {
    let token = Token {
        v: TOKEN_VERSION.to_owned(),
        generation: generation.to_owned(),
        start: start.clone(),
    };
    // Serializing strings and a bool cannot fail.
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn decode(text: &str) -> Result<Token, String> {
    let invalid = |why: &dyn std::fmt::Display| format!("continue key is not valid: {why}");
    if text.len() > MAX_CONTINUE_BYTES {
        return Err(invalid(&format!("longer than {MAX_CONTINUE_BYTES} bytes")));
    }
    // Tolerate padding, which some clients add when copying tokens.
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|e| invalid(&e))?;
    let token: Token = serde_json::from_slice(&bytes).map_err(|e| invalid(&e))?;
    if token.v != TOKEN_VERSION {
        return Err(invalid(&format!(
            "server does not recognize this encoded version {:?}",
            token.v
        )));
    }
    Ok(token)
}

/// Parses `limit`, `continue` and `resourceVersion` of a LIST.
pub fn parse(
    limit: Option<&str>,
    continue_token: Option<&str>,
    resource_version: Option<&str>,
) -> Result<PageRequest, PagingError> {
    let limit = match limit.map(str::trim) {
        None | Some("") => None,
        Some(text) => match text.parse::<i64>() {
            // As the API server: zero or a negative limit means no limit.
            Ok(n) if n <= 0 => None,
            Ok(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Err(_) => {
                return Err(PagingError::BadRequest(format!(
                    "limit: Invalid value: {text:?}: must be an integer"
                )));
            }
        },
    };
    let after = match continue_token.filter(|t| !t.is_empty()) {
        None => None,
        Some(token) => {
            if resource_version.is_some_and(|rv| !rv.is_empty() && rv != "0") {
                return Err(PagingError::BadRequest(
                    "specifying resource version is not allowed when using continue".to_owned(),
                ));
            }
            Some(
                decode(token)
                    .map_err(|e| PagingError::BadRequest(format!("invalid continue token: {e}")))?,
            )
        }
    };
    Ok(PageRequest { limit, after })
}

/// Cuts one page out of `items` (sorted by `key`, already filtered), whose
/// content has generation `generation`. `count_remaining`: whether to say
/// how many items follow (the API server says so only for lists without
/// selectors).
pub fn paginate<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> SortKey,
    request: &PageRequest,
    generation: &str,
    count_remaining: bool,
) -> Result<Page<T>, PagingError> {
    let mut items = items;
    if let Some(after) = &request.after {
        if after.generation != generation {
            return Err(PagingError::Expired {
                continue_token: encode(generation, &after.start),
            });
        }
        let first = items.partition_point(|item| key(item) <= after.start);
        items.drain(..first);
    }
    let Some(limit) = request.limit.filter(|limit| *limit < items.len()) else {
        return Ok(Page {
            items,
            continue_token: None,
            remaining: None,
        });
    };
    let remaining = items.len() - limit;
    items.truncate(limit);
    let continue_token = items.last().map(|last| encode(generation, &key(last)));
    Ok(Page {
        items,
        continue_token,
        remaining: count_remaining.then_some(remaining),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(name: &str) -> SortKey {
        (false, name.to_owned(), "cat".to_owned(), "ns".to_owned())
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("p{i:03}")).collect()
    }

    fn page(items: Vec<String>, request: &PageRequest, generation: &str) -> Page<String> {
        paginate(items, |s| key(s), request, generation, true).unwrap()
    }

    #[test]
    fn pages_cover_the_list_once_in_order() {
        let all = names(7);
        let mut request = parse(Some("3"), None, None).unwrap();
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            let p = page(all.clone(), &request, "g1");
            pages += 1;
            seen.extend(p.items.clone());
            match p.continue_token {
                Some(token) => {
                    assert_eq!(p.remaining, Some(all.len() - seen.len()));
                    request = parse(Some("3"), Some(&token), None).unwrap();
                }
                None => break,
            }
        }
        assert_eq!(seen, all);
        assert_eq!(pages, 3);
    }

    #[test]
    fn limits_as_the_api_server_reads_them() {
        let table = [
            (None, None),
            (Some(""), None),
            (Some("0"), None),
            (Some("-5"), None),
            (Some("2"), Some(2)),
            (Some("99999999999999"), Some(99_999_999_999_999)),
        ];
        for (text, want) in table {
            assert_eq!(parse(text, None, None).unwrap().limit, want, "{text:?}");
        }
        for bad in ["abc", "1.5", "0x10", "99999999999999999999"] {
            assert!(
                matches!(parse(Some(bad), None, None), Err(PagingError::BadRequest(m)) if m.contains("limit")),
                "{bad}"
            );
        }
        let all = page(names(2), &parse(Some("5"), None, None).unwrap(), "g");
        assert_eq!((all.items.len(), all.continue_token), (2, None));
    }

    #[test]
    fn hostile_tokens_are_bad_requests() {
        let valid = encode("g", &key("a"));
        let wrong_version = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"meta.k8s.io/v2","gen":"g","start":[false,"a","b","c"]}"#);
        let extra_field = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"meta.k8s.io/v1","gen":"g","start":[false,"a","b","c"],"x":1}"#);
        let wrong_shape = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"meta.k8s.io/v1","gen":"g","start":"a"}"#);
        let apiserver_shaped = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"meta.k8s.io/v1","rv":12,"start":"/registry/x\u0000"}"#);
        let hostile = [
            "%%%".to_owned(),
            "not base64!".to_owned(),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("not json"),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("[]"),
            wrong_version,
            extra_field,
            wrong_shape,
            apiserver_shaped,
            "A".repeat(MAX_CONTINUE_BYTES + 1),
            format!("{valid}\u{0}"),
        ];
        for token in hostile {
            match parse(None, Some(&token), None) {
                Err(PagingError::BadRequest(message)) => assert!(
                    message.starts_with("invalid continue token: continue key is not valid"),
                    "{message}"
                ),
                other => panic!("{token:?}: {other:?}"),
            }
        }
        assert!(matches!(
            parse(None, Some(&valid), Some("17")),
            Err(PagingError::BadRequest(m)) if m == "specifying resource version is not allowed when using continue"
        ));
        assert!(parse(None, Some(&valid), Some("0")).is_ok());
    }

    #[test]
    fn a_token_of_changed_content_expires_with_a_fresh_one() {
        let first = page(names(5), &parse(Some("2"), None, None).unwrap(), "old");
        let token = first.continue_token.unwrap();
        let request = parse(Some("2"), Some(&token), None).unwrap();
        let Err(PagingError::Expired { continue_token }) =
            paginate(names(5), |s| key(s), &request, "new", true)
        else {
            panic!("a changed generation must expire the token");
        };
        // The fresh token continues after the same position in the new
        // content.
        let rest = page(
            names(5),
            &parse(None, Some(&continue_token), None).unwrap(),
            "new",
        );
        assert_eq!(rest.items, ["p002", "p003", "p004"]);
    }

    #[test]
    fn remaining_count_only_when_asked() {
        let p = paginate(
            names(4),
            |s| key(s),
            &parse(Some("1"), None, None).unwrap(),
            "g",
            false,
        )
        .unwrap();
        assert_eq!((p.items.len(), p.remaining), (1, None));
        assert!(p.continue_token.is_some());
    }

    proptest! {
        #[test]
        fn any_limit_pages_through_everything(n in 0usize..40, limit in 1usize..12) {
            let all = names(n);
            let mut request = parse(Some(&limit.to_string()), None, None).unwrap();
            let mut seen = Vec::new();
            loop {
                let p = page(all.clone(), &request, "g");
                prop_assert!(p.items.len() <= limit);
                seen.extend(p.items);
                match p.continue_token {
                    Some(token) => request = parse(Some(&limit.to_string()), Some(&token), None).unwrap(),
                    None => break,
                }
            }
            prop_assert_eq!(seen, all);
        }

        #[test]
        fn arbitrary_tokens_never_panic(token in ".{0,200}") {
            let _ = parse(Some("1"), Some(&token), None);
        }
    }
}
