//! An error's message with its causes: the outermost layer of an HTTP client or
//! server error often names only itself ("error reading a body from connection"),
//! while the cause says what went wrong ("invalid chunk size line").

/// `e`'s message followed by each of its causes, `: `-separated (a cause whose message
/// the layer above already ends with is not repeated).
///
/// ```
/// #[derive(Debug)]
/// struct BodyError(std::io::Error);
/// impl std::fmt::Display for BodyError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("error reading a body from connection")
///     }
/// }
/// impl std::error::Error for BodyError {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// let e = BodyError(std::io::Error::other("invalid chunk size line"));
/// assert_eq!(
///     jelly_server::error_chain::with_causes(&e),
///     "error reading a body from connection: invalid chunk size line"
/// );
/// ```
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        // Some layers repeat their cause's message.
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
