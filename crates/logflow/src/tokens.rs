//! A log message split into tokens: words, and the runs of punctuation between them
//! (whitespace separates and is dropped). A word that is a value is typed: a number, hex,
//! a UUID, an IPv4 address, a path; a word that holds a digit and is none of these is
//! still likely a value (`G1234`, `09.939s`), which the template tree treats as one.
//!
//! Punctuation splits words so that a value inside brackets or after `key=` or `key:` is
//! a word of its own: `[AccountId:4d2a46c7-71cb-4cf1-b5bb-b68406d9da6f]` is `[`,
//! `AccountId`, `:`, the UUID, `]`. A path with a query string (`/get?key=k&n=2`) is one
//! path value, as a URL is one value to the code that logs it; `points` reads its query.
//! Such a path runs to its end (a space, a quote or a closing bracket), so one macro
//! call's lines have one token count whatever their URLs, and Drain mines them as one
//! template.
//! Every delimiter is ASCII, so tokens are whole UTF-8.

/// The kind of value a word is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mask {
    /// A decimal number, with an optional sign and decimal point.
    Num,
    /// A hexadecimal value: `0x1f`, or eight or more hex digits with a letter among them.
    Hex,
    /// A UUID.
    Uuid,
    /// An IPv4 address (four dot-separated decimal parts).
    Ip,
    /// A path (`/a/b`), with its query string if it has one.
    Path,
}

impl Mask {
    /// How a template shows a parameter of this kind.
    pub fn placeholder(self) -> &'static str {
        match self {
            Mask::Num => "<NUM>",
            Mask::Hex => "<HEX>",
            Mask::Uuid => "<UUID>",
            Mask::Ip => "<IP>",
            Mask::Path => "<PATH>",
        }
    }
}

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A word with no digit: likely the log point's own text.
    Word,
    /// A run of punctuation.
    Punct,
    /// A typed value.
    Value(Mask),
    /// A word with a digit that is not a typed value.
    Digits,
}

impl Kind {
    /// Whether the token is probably a value (and so not a key in the template tree).
    pub fn is_variable(self) -> bool {
        matches!(self, Kind::Value(_) | Kind::Digits)
    }
}

/// A word or a run of punctuation of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    /// Its text.
    pub text: &'a str,
    /// What kind of token it is.
    pub kind: Kind,
}

/// A byte's class for splitting: whitespace, punctuation, or part of a word ...
const SPACE: u8 = 1;
const PUNCT: u8 = 2;
const WORD: u8 = 0;
const CLASS_BITS: u8 = 3;
/// ... and, a bit apart, whether it is a digit (part of a word).
const DIGIT: u8 = 4;

/// Every byte's class, looked up once per byte rather than tested against each
/// delimiter.
static CLASS: [u8; 256] = {
    let mut class = [WORD; 256];
    let mut d = b'0';
    while d <= b'9' {
        class[d as usize] = WORD | DIGIT;
        d += 1;
    }
    let punct = b"[](){}<>,;=:\"'|&?@";
    let mut i = 0;
    while i < punct.len() {
        class[punct[i] as usize] = PUNCT;
        i += 1;
    }
    // `u8::is_ascii_whitespace`: space, tab, line feed, form feed, carriage return.
    let space = b" \t\n\x0c\r";
    let mut i = 0;
    while i < space.len() {
        class[space[i] as usize] = SPACE;
        i += 1;
    }
    class
};

fn class(b: u8) -> u8 {
    CLASS[b as usize] & CLASS_BITS
}

/// The tokens of `message`, into `out` (cleared first).
pub fn tokenize<'a>(message: &'a str, out: &mut Vec<Token<'a>>) {
    out.clear();
    let bytes = message.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start_class = class(bytes[i]);
        if start_class == SPACE {
            i += 1;
            continue;
        }
        let start = i;
        if let Some(end) = url_end(bytes, i) {
            i = end;
            out.push(Token {
                text: &message[start..end],
                kind: Kind::Value(Mask::Path),
            });
            continue;
        }
        // Whether a word holds a digit is seen on the way through it, in the same look
        // at each byte's class. The byte that ends the run is seen too: it ends a word
        // only as punctuation or space, neither a digit, and a run of punctuation does
        // not ask.
        let mut seen = 0;
        i += bytes[i..]
            .iter()
            .position(|&b| {
                let c = CLASS[b as usize];
                seen |= c;
                c & CLASS_BITS != start_class
            })
            .unwrap_or(bytes.len() - i);
        let digit = seen & DIGIT != 0;
        // Both ends are at ASCII bytes (or the ends of the string): char boundaries.
        let text = &message[start..i];
        let kind = if start_class == PUNCT {
            Kind::Punct
        } else {
            classify_word(text, digit)
        };
        out.push(Token { text, kind });
    }
}

/// Lines' tokens, kept as where each lies in its line's message and what kind it is:
/// four bytes a token, where a [`Token`] takes 24, so that a second pass over the lines
/// reads them back instead of tokenizing again.
#[derive(Default)]
pub struct KeptTokens {
    /// Each token's start (16 bits), length (12) and kind (4).
    spans: Vec<u32>,
    /// Where each line's tokens end in `spans`, and [`KeptTokens::NOT_KEPT`] for a line
    /// whose tokens were not kept.
    ends: Vec<usize>,
}

impl KeptTokens {
    /// Messages longer than this keep no tokens (their positions do not fit): the
    /// second pass tokenizes them again. Lines are cut far below it.
    const MAX_MESSAGE: usize = u16::MAX as usize;
    /// Nor do messages with a token longer than this (a blob).
    const MAX_TOKEN: usize = (1 << 12) - 1;
    const NOT_KEPT: usize = 1 << (usize::BITS - 1);

    /// Room for `lines` lines of `bytes` bytes of messages, made at once: grown by
    /// doubling, the tokens would be copied to fresh memory each time, and the peak hold
    /// three times their size. The demo's and Nezha's messages have a token per 5.2
    /// bytes; room not used is address space, not memory.
    pub fn with_capacity(lines: usize, bytes: usize) -> KeptTokens {
        KeptTokens {
            spans: Vec::with_capacity(bytes / 4),
            ends: Vec::with_capacity(lines),
        }
    }

    /// How many tokens are kept, of all lines.
    pub fn token_count(&self) -> usize {
        self.spans.len()
    }

    /// Keeps the next line's `tokens`, slices of `message`.
    pub fn push(&mut self, message: &str, tokens: &[Token<'_>]) {
        // A message no longer than a token may be (most are) needs no look at its tokens.
        let fits = message.len() <= Self::MAX_TOKEN
            || (message.len() <= Self::MAX_MESSAGE
                && tokens.iter().all(|t| t.text.len() <= Self::MAX_TOKEN));
        if !fits {
            self.ends.push(self.spans.len() | Self::NOT_KEPT);
            return;
        }
        let base = message.as_ptr() as usize;
        // Offsets within a message of at most u16::MAX bytes fit in 16 bits.
        self.spans.extend(tokens.iter().map(|t| {
            let start = (t.text.as_ptr() as usize - base) as u32;
            start | (t.text.len() as u32) << 16 | u32::from(kind_code(t.kind)) << 28
        }));
        self.ends.push(self.spans.len());
    }

    /// Line `line`'s kept tokens, if its tokens were kept.
    fn line_spans(&self, line: usize) -> Option<&[u32]> {
        let end = *self.ends.get(line)?;
        if end & Self::NOT_KEPT != 0 {
            return None;
        }
        let start = line
            .checked_sub(1)
            .map_or(0, |before| self.ends[before] & !Self::NOT_KEPT);
        self.spans.get(start..end)
    }

    /// Line `line`'s tokens' texts, read back from `message` (the one it was kept
    /// with), if they were kept.
    pub fn texts<'a>(
        &self,
        line: usize,
        message: &'a str,
    ) -> Option<impl Iterator<Item = &'a str> + use<'_, 'a>> {
        let spans = self.line_spans(line)?;
        Some(spans.iter().map(move |&span| span_text(span, message)))
    }

    /// Line `line`'s tokens, read back from `message` (the one it was kept with) into
    /// `out` (cleared first); tokenized again when none were kept.
    pub fn read<'a>(&self, line: usize, message: &'a str, out: &mut Vec<Token<'a>>) {
        let Some(spans) = self.line_spans(line) else {
            return tokenize(message, out);
        };
        out.clear();
        out.extend(spans.iter().map(|&span| Token {
            text: span_text(span, message),
            kind: kind_of_code((span >> 28) as u8),
        }));
    }
}

/// A kept token's text in its message.
fn span_text(span: u32, message: &str) -> &str {
    let at = (span & 0xffff) as usize;
    let len = (span >> 16 & 0xfff) as usize;
    message.get(at..at + len).unwrap_or_default()
}

/// A kind as four bits, for [`KeptTokens`].
fn kind_code(kind: Kind) -> u8 {
    match kind {
        Kind::Word => 0,
        Kind::Punct => 1,
        Kind::Digits => 2,
        Kind::Value(Mask::Num) => 3,
        Kind::Value(Mask::Hex) => 4,
        Kind::Value(Mask::Uuid) => 5,
        Kind::Value(Mask::Ip) => 6,
        Kind::Value(Mask::Path) => 7,
    }
}

/// Each code's kind, looked up rather than matched: read for every token kept.
const KIND_OF_CODE: [Kind; 16] = {
    let mut kinds = [Kind::Word; 16];
    kinds[1] = Kind::Punct;
    kinds[2] = Kind::Digits;
    kinds[3] = Kind::Value(Mask::Num);
    kinds[4] = Kind::Value(Mask::Hex);
    kinds[5] = Kind::Value(Mask::Uuid);
    kinds[6] = Kind::Value(Mask::Ip);
    kinds[7] = Kind::Value(Mask::Path);
    kinds
};

fn kind_of_code(code: u8) -> Kind {
    KIND_OF_CODE[usize::from(code & 0xf)]
}

/// Where a path with a query string that starts at `at` ends, if one does: at
/// whitespace or a closing bracket or quote, without a trailing `,` `.` `;` `:`.
fn url_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'/') || matches!(bytes.get(at + 1), Some(b'/') | None) {
        return None;
    }
    let mut end = at + 1;
    let mut query = false;
    while let Some(&b) = bytes.get(end) {
        if b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b']' | b')' | b'}' | b'>' | b'|') {
            break;
        }
        query |= b == b'?';
        end += 1;
    }
    while end > at + 1 && matches!(bytes[end - 1], b',' | b'.' | b';' | b':') {
        end -= 1;
    }
    query.then_some(end)
}

/// What kind of word `word` is.
pub fn classify(word: &str) -> Kind {
    classify_word(word, word.bytes().any(|b| b.is_ascii_digit()))
}

/// What kind of word `word` is, `digit` telling whether it holds a digit.
fn classify_word(word: &str, digit: bool) -> Kind {
    let b = word.as_bytes();
    // Most words hold no digit, and of the kinds below only a UUID and a path can be
    // without one.
    if !digit {
        return if is_uuid(b) {
            Kind::Value(Mask::Uuid)
        } else if is_path(b) {
            Kind::Value(Mask::Path)
        } else {
            Kind::Word
        };
    }
    // A number first, the commonest: no number is a UUID (a `-` inside) or an address
    // (three dots), so the order decides nothing.
    if is_number(b) {
        Kind::Value(Mask::Num)
    } else if is_uuid(b) {
        Kind::Value(Mask::Uuid)
    } else if is_ipv4(b) {
        Kind::Value(Mask::Ip)
    } else if is_hex(b) {
        Kind::Value(Mask::Hex)
    } else if is_path(b) {
        Kind::Value(Mask::Path)
    } else {
        Kind::Digits
    }
}

fn is_path(b: &[u8]) -> bool {
    b.len() > 1 && b[0] == b'/' && b[1] != b'/'
}

fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn is_ipv4(b: &[u8]) -> bool {
    let mut parts = 0;
    for part in b.split(|c| *c == b'.') {
        parts += 1;
        if part.is_empty() || part.len() > 3 || !part.iter().all(u8::is_ascii_digit) {
            return false;
        }
    }
    parts == 4
}

/// `-12`, `3.5`, `42`: digits with an optional sign and one decimal point.
fn is_number(b: &[u8]) -> bool {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    let mut dot = false;
    !digits.is_empty()
        && digits[0].is_ascii_digit()
        && digits.iter().all(|c| match c {
            b'.' if !dot => {
                dot = true;
                true
            }
            c => c.is_ascii_digit(),
        })
        && digits.last().is_some_and(u8::is_ascii_digit)
}

/// `0x1f`, or eight or more hex digits with a letter among them (ids, hashes).
fn is_hex(b: &[u8]) -> bool {
    if let Some(rest) = b.strip_prefix(b"0x").or_else(|| b.strip_prefix(b"0X")) {
        return !rest.is_empty() && rest.iter().all(u8::is_ascii_hexdigit);
    }
    b.len() >= 8
        && b.iter().all(u8::is_ascii_hexdigit)
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_alphabetic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kinds(message: &str) -> Vec<(&str, Kind)> {
        let mut out = Vec::new();
        tokenize(message, &mut out);
        out.into_iter().map(|t| (t.text, t.kind)).collect()
    }

    #[test]
    fn words_values_and_punctuation_are_told_apart() {
        use Kind::*;
        assert_eq!(
            kinds("[Security Info Get][AccountId:4d2a46c7-71cb-4cf1-b5bb-b68406d9da6f]"),
            vec![
                ("[", Punct),
                ("Security", Word),
                ("Info", Word),
                ("Get", Word),
                ("][", Punct),
                ("AccountId", Word),
                (":", Punct),
                ("4d2a46c7-71cb-4cf1-b5bb-b68406d9da6f", Value(Mask::Uuid)),
                ("]", Punct),
            ]
        );
        assert_eq!(
            kinds("from 10.0.0.12:8080 took -3.5 ms, trip=G1234 id 0x1F trace 93bead877ae15b6d /api/v1/x"),
            vec![
                ("from", Word),
                ("10.0.0.12", Value(Mask::Ip)),
                (":", Punct),
                ("8080", Value(Mask::Num)),
                ("took", Word),
                ("-3.5", Value(Mask::Num)),
                ("ms", Word),
                (",", Punct),
                ("trip", Word),
                ("=", Punct),
                ("G1234", Digits),
                ("id", Word),
                ("0x1F", Value(Mask::Hex)),
                ("trace", Word),
                ("93bead877ae15b6d", Value(Mask::Hex)),
                ("/api/v1/x", Value(Mask::Path)),
            ]
        );
        // A path with a query is one value, up to a space, quote or bracket, without the
        // sentence's full stop; a path without one is split as words are.
        assert_eq!(
            kinds("GET uri=/put?key=rec-5&value=a@b:1, then (/get?key=7). \"/x?\" /a:b"),
            vec![
                ("GET", Word),
                ("uri", Word),
                ("=", Punct),
                ("/put?key=rec-5&value=a@b:1", Value(Mask::Path)),
                (",", Punct),
                ("then", Word),
                ("(", Punct),
                ("/get?key=7", Value(Mask::Path)),
                (")", Punct),
                (".", Word),
                ("\"", Punct),
                ("/x?", Value(Mask::Path)),
                ("\"", Punct),
                ("/a", Value(Mask::Path)),
                (":", Punct),
                ("b", Word),
            ]
        );
        // Not values: a version-like word, a word of hex letters only, a URL's slashes.
        assert_eq!(classify("1.2.3"), Digits);
        assert_eq!(classify("deadbeef"), Word);
        assert_eq!(classify("//host"), Word);
        assert_eq!(classify("1.2.3.4.5"), Digits);
    }

    #[test]
    fn every_kind_is_kept_as_itself() {
        let masks = [Mask::Num, Mask::Hex, Mask::Uuid, Mask::Ip, Mask::Path];
        let kinds = [Kind::Word, Kind::Punct, Kind::Digits]
            .into_iter()
            .chain(masks.map(Kind::Value));
        let mut codes = Vec::new();
        for kind in kinds {
            assert_eq!(kind_of_code(kind_code(kind)), kind);
            codes.push(kind_code(kind));
        }
        assert!(codes.iter().all(|&c| c < 16));
    }

    #[test]
    fn a_message_or_token_too_long_to_keep_is_tokenized_again() {
        let long = format!("{} id=7", "word ".repeat(20_000));
        let mut tokens = Vec::new();
        tokenize(&long, &mut tokens);
        let mut kept = KeptTokens::default();
        kept.push("short 1", &[]);
        kept.push(&long, &tokens);
        assert!(kept.spans.is_empty());
        let mut read = Vec::new();
        kept.read(1, &long, &mut read);
        assert_eq!(read, tokens);
        kept.read(0, "short 1", &mut read);
        assert!(read.is_empty());
        // A token too long to keep (a blob), between lines that are kept.
        let blob = format!("x {} y=9", "a".repeat(5000));
        let mut kept = KeptTokens::default();
        for m in ["a 1", &blob, "b=2"] {
            tokenize(m, &mut tokens);
            kept.push(m, &tokens);
        }
        for (i, m) in ["a 1", &blob, "b=2"].into_iter().enumerate() {
            tokenize(m, &mut tokens);
            kept.read(i, m, &mut read);
            assert_eq!(read, tokens);
            assert_eq!(kept.texts(i, m).is_some(), i != 1);
        }
        assert_eq!(kept.spans.len(), 5);
    }

    proptest! {
        /// `classify_word` tries a number first: no word may be a number and a UUID or
        /// an address too.
        #[test]
        fn a_number_is_never_a_uuid_or_an_address(word in "-?[0-9a-f.-]{0,40}") {
            let b = word.as_bytes();
            prop_assert!(!(is_number(b) && (is_uuid(b) || is_ipv4(b))), "{word}");
        }

        #[test]
        fn kept_tokens_read_back_as_tokenized(messages in proptest::collection::vec("\\PC{0,60}", 0..8)) {
            let mut kept = KeptTokens::default();
            let mut tokens = Vec::new();
            for m in &messages {
                tokenize(m, &mut tokens);
                kept.push(m, &tokens);
            }
            let mut read = vec![Token { text: "stale", kind: Kind::Word }];
            for (i, m) in messages.iter().enumerate() {
                tokenize(m, &mut tokens);
                kept.read(i, m, &mut read);
                prop_assert_eq!(&read, &tokens);
                let texts: Vec<&str> = kept.texts(i, m).expect("kept").collect();
                prop_assert_eq!(texts, tokens.iter().map(|t| t.text).collect::<Vec<_>>());
            }
        }

        #[test]
        fn tokens_cover_every_non_space_byte_in_order(message in "\\PC{0,80}") {
            let mut out = Vec::new();
            tokenize(&message, &mut out);
            let joined: String = out.iter().map(|t| t.text).collect();
            let kept: String = message.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            prop_assert_eq!(joined, kept);
            for t in &out {
                prop_assert!(!t.text.is_empty());
            }
        }

        /// The kind seen on the way through a word is the kind of the word alone; a run
        /// of punctuation is punctuation only.
        #[test]
        fn each_token_is_of_the_kind_of_its_text_alone(message in "[a-f0-9 =:/?.,\\[\\]-]{0,80}") {
            let mut out = Vec::new();
            tokenize(&message, &mut out);
            for t in &out {
                if t.kind == Kind::Punct {
                    prop_assert!(t.text.bytes().all(|b| class(b) == PUNCT), "{:?}", t);
                } else if t.kind != Kind::Value(Mask::Path) {
                    prop_assert_eq!(t.kind, classify(t.text), "{:?} in {}", t, message);
                }
            }
        }
    }
}
