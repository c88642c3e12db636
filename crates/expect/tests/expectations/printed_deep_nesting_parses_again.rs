//! Text nested just under the parser's limit prints as text the parser takes again: the
//! printer may bracket an expression as a whole (a few levels), never each level of a
//! chain or nest, so printed text nests at most a constant deeper than the parsed one.

use causeway_expect::lang::parse;

/// Levels of nesting printed text may add, whatever the depth.
const MARGIN: usize = 4;

/// The deepest accepted text of each shape, printed, parses again.
#[test]
fn chains_and_nests_just_under_the_limit_print_back() {
    // Text before, the repeated opener, its closer, the innermost part, text after.
    let shapes: [(&str, &str, &str, &str, &str); 8] = [
        ("assert(2", " ** 2", "", "", " > 0);"),
        ("assert(1", " + 1", "", "", " > 0);"),
        ("assert(", "-", "", "1", " > 0);"),
        ("assert(", "(", ")", "1", " > 0);"),
        ("assert(", "!", "", "1", " > 0);"),
        ("validator S : A", " && A", "", "", ";"),
        ("validator S : A", " -> A", "", "", ";"),
        ("validator S : ", "!(", ")", "A", ";"),
    ];
    for (before, open, close, inner, after) in shapes {
        let text = |d: usize| {
            format!(
                "{before}{}{inner}{}{after}",
                open.repeat(d),
                close.repeat(d)
            )
        };
        // The deepest text the parser accepts.
        let deepest = (0..400)
            .take_while(|d| parse(&text(*d)).is_ok())
            .last()
            .unwrap_or_else(|| panic!("{:?} does not parse", text(0)));
        assert!(deepest > 2 * MARGIN, "{open:?}: only {deepest} deep");
        // A few levels are the printer's outer brackets (`assert((... > 0))`).
        for d in [deepest / 2, deepest - MARGIN] {
            let printed = parse(&text(d)).unwrap().to_string();
            if let Err(e) = parse(&printed) {
                panic!("{before}{open}..., depth {d}: printed text fails: {e:?}");
            }
        }
    }
}
