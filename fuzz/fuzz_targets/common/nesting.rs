//! Text nested as deep as the fuzzer asks, for the parsers' nesting targets: random
//! bytes rarely nest deeply, so the input picks a construct and a depth and the text is
//! built (up to 1 MiB of it).

/// A way to nest: text before the repeated part, the opener, the closer, text after.
pub type Nesting = (&'static str, &'static str, &'static str, &'static str);

/// The text `data` asks for: its first byte picks one of `nestings`, the next two the
/// depth, and the rest goes in the middle so the fuzzer can vary the innermost part.
pub fn nested_text(data: &[u8], nestings: &[Nesting]) -> Option<String> {
    let [which, hi, lo, rest @ ..] = data else {
        return None;
    };
    let (before, open, close, after) = nestings[*which as usize % nestings.len()];
    let max = (1 << 20) / (open.len() + close.len()).max(1);
    let depth = ((*hi as usize) << 8 | *lo as usize) * 8 % max;
    let middle = String::from_utf8_lossy(rest);
    Some(format!(
        "{before}{}{middle}{after}{}",
        open.repeat(depth),
        close.repeat(depth)
    ))
}
