//! Lines stitched into requests.
//!
//! A first pass, by identifiers and time, finds where requests start when they rarely
//! overlap: lines that print one value of a ranked request identifier within a window
//! of each other are one request, on any node; lines of one file (and thread) that
//! follow each other closely are a run, and runs of different nodes that overlap in
//! time, or follow closely, are one request. A log point of a node that is mostly the
//! first line of its request there starts requests (lprof's top-level methods).
//!
//! The walk then takes every line in time order. A line joins, in this order:
//! 1. the request of the line a sure identifier's value or a learned link ties it to
//!    (`links`: a value printed by one log point and soon after by another), or that a
//!    duration it prints counts back to (`durations`: `latency_ms=26` on a request's
//!    last line, 26 ms after its first), the strongest first, then the latest line; but
//!    a slow link (its window `slow_link_ns` or longer) to a request that has been quiet
//!    for longer than `quiet_ns` yields to the request of the line's learned
//!    predecessor (3.) when that request began since:
//!    a value passed on over seconds goes to a later request as often as within one (an
//!    order paid after it is made), while values within a request pass in milliseconds,
//!    however long the request waits between them (a queue);
//! 2. a new request, if it prints a value no line printed before of an identifier named
//!    as a request's id (`ids`), or if its log point starts requests: learned by the
//!    first pass, or because it passes values on by links and is never linked to, or
//!    because it comes only after other nodes' log points, each of which it follows in
//!    fewer than one in three of their lines (a client's next call, sent as soon as the
//!    request before ended, which no pause sets apart); but
//!    first, unless the first pass learned it starts requests of more than one line,
//!    the request that printed one of its log point's steady predecessors last, within
//!    the predecessor's lag (a step that makes a value, an order, or that comes after a
//!    slow one, a token after a password check, follows the step before it in one
//!    handler at a steady lag);
//! 3. the request that printed one of its log point's learned predecessors last, within
//!    the predecessor's lag (lprof's order between log points, across nodes too: the
//!    log points a line most often comes right after, with a steady lag); in this rule
//!    and the second, a predecessor's line on the line's own node first;
//! 4. the request of the line before it, on any node, unless the log fell quiet for
//!    longer than `bridge_ns`, or that line is of the same node and at a log point the
//!    line's own log point is learned to come before (lprof's broken order);
//! 5. a new request.

mod durations;
mod first_pass;
mod order;
mod walk;

use foldhash::HashSet;

use crate::corpus::Corpus;
use crate::ids::{Evidence, Variable};
use crate::links::Links;

pub use first_pass::by_identifiers_and_time;

/// How lines are joined into requests.
#[derive(Clone, Debug)]
pub struct StitchOptions {
    /// Variables scoring at least this are request identifiers (in the first pass).
    pub min_score: f64,
    /// Variables scoring at least this are request identifiers in the walk too.
    pub sure_score: f64,
    /// Occurrences of an identifier's value at most this far apart join (those of an
    /// identifier named as a request's id join in the walk however far apart).
    pub id_window_ns: i64,
    /// Consecutive lines of one file and thread at most this far apart join.
    pub local_gap_ns: i64,
    /// Runs of lines on different nodes that overlap, or follow each other within this,
    /// join.
    pub cross_gap_ns: i64,
    /// A node's log point starts requests when at least this share of its lines are the
    /// first of their request in the first pass ...
    pub start_share: f64,
    /// ... and it was seen at least this often.
    pub start_evidence: usize,
    /// A pause of the whole log longer than this ends a request.
    pub bridge_ns: i64,
    /// A log point follows those its lines come right after at least this share of the
    /// time, soon.
    pub predecessor_share: f64,
    /// A slow link to a request quiet for longer than this yields to a request begun
    /// since ...
    pub quiet_ns: i64,
    /// ... a link is slow when its window is at least this.
    pub slow_link_ns: i64,
    /// Variables of these names are request identifiers whatever their score ...
    pub pinned: Vec<String>,
    /// ... and of these names are not.
    pub excluded: Vec<String>,
}

impl Default for StitchOptions {
    fn default() -> Self {
        StitchOptions {
            min_score: 0.2,
            sure_score: 0.9,
            id_window_ns: 2_000_000_000,
            local_gap_ns: 50_000_000,
            cross_gap_ns: 30_000_000,
            start_share: 0.7,
            start_evidence: 5,
            bridge_ns: 500_000_000,
            quiet_ns: 50_000_000,
            slow_link_ns: 1_000_000_000,
            predecessor_share: 0.2,
            pinned: Vec::new(),
            excluded: Vec::new(),
        }
    }
}

/// Each line's request, numbered from 0 in order of each request's first line.
pub fn stitch(corpus: &Corpus, ranked: &[Evidence], links: &Links, o: &StitchOptions) -> Vec<u32> {
    stitch_after(corpus, ranked, links, o, &[])
}

/// [`stitch`], with some lines' requests given (`given[i]` for line `i`: the lines a
/// window read again from the window before, which stitched them): lines with the same
/// given request are one request, and later lines join them as they would have there.
pub fn stitch_after(
    corpus: &Corpus,
    ranked: &[Evidence],
    links: &Links,
    o: &StitchOptions,
    given: &[Option<u32>],
) -> Vec<u32> {
    // Pinned identifiers, and those with every mark of one, join by value on their own
    // (links need a few requests to be learned); links carry the rest.
    let sure = identifiers(
        ranked,
        &StitchOptions {
            min_score: o.sure_score,
            ..o.clone()
        },
    );
    let excluded: HashSet<Variable> = ranked
        .iter()
        .filter(|e| o.excluded.contains(&e.name))
        .map(|e| e.variable)
        .collect();
    // By node point (`Moment::node_point`).
    let predecessors = order::predecessors(corpus, o);
    let files = order::files(corpus);
    let starts: Vec<walk::Start> = first_pass::link_starts(corpus, links)
        .into_iter()
        .zip(order::after_others_rarely(&predecessors, &files))
        .zip(first_pass::first_pass_starts(
            corpus,
            &by_identifiers_and_time(corpus, ranked, o),
            o,
        ))
        .map(
            |((by_links, by_order), by_first_pass)| match (by_first_pass, by_links || by_order) {
                ((true, false), _) => walk::Start::ByTime,
                ((true, true), _) | ((false, _), true) => walk::Start::Weakly,
                ((false, _), false) => walk::Start::No,
            },
        )
        .collect();
    let (recent, order) = order::Recent::numbered(&predecessors, &files);
    let named: HashSet<Variable> = ranked
        .iter()
        .filter(|e| e.named_request_id && sure.contains(&e.variable))
        .map(|e| e.variable)
        .collect();
    let mut facts = walk::Facts::new(corpus, links, (&sure, &named, &excluded), order);
    let durations = durations::learn(corpus, o);
    let mut walk = walk::Walk::new(corpus, links, o, starts, predecessors, recent, durations);
    let mut requests = vec![0u32; corpus.lines.len()];
    for (at, m) in corpus.timeline().iter().enumerate() {
        let Some(f) = facts.of(corpus, m) else {
            continue;
        };
        requests[m.line] = walk.step(at, m, f, given.get(m.line).copied().flatten());
    }
    numbered(&requests)
}

/// The variables taken for request identifiers.
pub fn identifiers(ranked: &[Evidence], o: &StitchOptions) -> HashSet<Variable> {
    ranked
        .iter()
        .filter(|e| {
            o.pinned.contains(&e.name) || (e.score >= o.min_score && !o.excluded.contains(&e.name))
        })
        .map(|e| e.variable)
        .collect()
}

/// Requests renumbered from 0 in order of their first line. (Request numbers are below
/// the number of lines, so the new numbers are kept in a vector by the old.)
fn numbered(requests: &[u32]) -> Vec<u32> {
    let mut numbers: Vec<u32> = Vec::new();
    let mut next = 0;
    requests
        .iter()
        .map(|&r| {
            let r = r as usize;
            if numbers.len() <= r {
                numbers.resize(r + 1, u32::MAX);
            }
            if numbers[r] == u32::MAX {
                numbers[r] = next;
                next += 1;
            }
            numbers[r]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Options;
    use crate::ids::rank;
    use crate::links;
    use foldhash::HashMap;

    #[test]
    fn lines_given_one_request_stay_one_and_others_keep_their_own() {
        // Seconds apart, nothing shared: on their own, four requests.
        let log = "1970-01-01T00:00:01Z alpha 11\n\
                   1970-01-01T00:00:03Z beta 22\n\
                   1970-01-01T00:00:05Z gamma 33\n\
                   1970-01-01T00:00:07Z delta 11\n";
        let corpus = Corpus::read(&[("a.log".into(), log.into())], Options::default());
        let ranked = rank(&corpus);
        let links = Links::default();
        let o = StitchOptions::default();
        let alone = stitch(&corpus, &ranked, &links, &o);
        assert_eq!(alone, [0, 1, 2, 3]);
        assert_eq!(
            stitch_after(&corpus, &ranked, &links, &o, &[None; 4]),
            alone
        );
        // The window before made one request of lines 1 and 3.
        let given = [Some(9), None, Some(9), None];
        let after = stitch_after(&corpus, &ranked, &links, &o, &given);
        assert_eq!(after[0], after[2]);
        assert_ne!(after[0], after[1]);
        assert_ne!(after[1], after[3]);
    }

    #[test]
    fn lines_sharing_a_request_id_join_across_files_and_neighbours_join_in_a_file() {
        // Two files (nodes); requests a1 and b2 interleave; "cache warm" lines carry no
        // id and follow their request's line within a millisecond.
        let mut front = String::new();
        let mut back = String::new();
        for (k, id) in ["a1b2c3d4e5", "f6a7b8c9d0", "0a9b8c7d6e", "1f2e3d4c5b"]
            .iter()
            .enumerate()
        {
            let s = k as i64 * 3;
            front += &format!("1970-01-01T00:00:{s:02}.000Z [main] got request {id}\n");
            front += &format!("1970-01-01T00:00:{s:02}.001Z [main] cache warm\n");
            back += &format!("1970-01-01T00:00:{s:02}.050Z [pool] serving {id}\n");
            front += &format!("1970-01-01T00:00:{:02}.100Z [main] answered {id}\n", s + 1);
        }
        let corpus = Corpus::read(
            &[
                ("front.log".into(), front.into_bytes()),
                ("back.log".into(), back.into_bytes()),
            ],
            Options::default(),
        );
        let ranked = rank(&corpus);
        let requests = by_identifiers_and_time(&corpus, &ranked, &StitchOptions::default());
        // Front's lines come first (file order): got, warm, answered per request; then back's.
        let request_of = |file: u32, number: u32| {
            let i = corpus
                .lines
                .iter()
                .position(|l| l.file == file && l.number == number)
                .expect("the line");
            requests[i]
        };
        for k in 0..4u32 {
            let r = request_of(0, 3 * k + 1);
            assert_eq!(request_of(0, 3 * k + 2), r, "cache warm of request {k}");
            assert_eq!(request_of(0, 3 * k + 3), r, "answer of request {k}");
            assert_eq!(request_of(1, k + 1), r, "back end of request {k}");
            assert_eq!(r, k);
        }
    }

    #[test]
    fn runs_on_different_nodes_join_when_they_overlap_and_not_across_a_pause() {
        // No identifiers: web logs a request's start and end 40 ms apart, db logs a query
        // between them; the next request comes a second later.
        let mut web = String::new();
        let mut db = String::new();
        for k in 0..3 {
            web += &format!("1970-01-01T00:00:0{k}.000Z begin\n1970-01-01T00:00:0{k}.040Z end\n");
            db += &format!("1970-01-01T00:00:0{k}.020Z query\n");
        }
        let corpus = Corpus::read(
            &[
                ("web.log".into(), web.into_bytes()),
                ("db.log".into(), db.into_bytes()),
            ],
            Options::default(),
        );
        let requests = by_identifiers_and_time(&corpus, &rank(&corpus), &StitchOptions::default());
        // web: begin, end per request; then db: one query per request.
        assert_eq!(requests, vec![0, 0, 1, 1, 2, 2, 0, 1, 2]);
    }

    #[test]
    fn a_request_id_first_printed_begins_a_request_though_a_users_id_ties_it_back() {
        // Twelve users, each making one request after another (10 ms between), their
        // requests overlapping: web logs a request's start and end with its id and the
        // user's, the cart reads the user's cart in between. The user's id ties each
        // start to the end of the user's request before.
        let at = |ms: u32| format!("1970-01-01T00:00:{:02}.{:03}Z", ms / 1000, ms % 1000);
        let mut web: Vec<(u32, String)> = Vec::new();
        let mut cart: Vec<(u32, String)> = Vec::new();
        let mut ids = Vec::new();
        for user in 0..12u32 {
            for j in 0..4u32 {
                let t = user * 21 + j * 260;
                let id = format!("{:08x}", (user * 8 + j) * 7919 + 17);
                let who = format!("u-{:04x}", user * 4099 + 7);
                web.push((t, format!("{} {{\"msg\":\"request started\",\"request_id\":\"{id}\",\"user\":\"{who}\"}}", at(t))));
                cart.push((
                    t + 2,
                    format!("{} {{\"msg\":\"cart read for {who}\"}}", at(t + 2)),
                ));
                web.push((t + 250, format!("{} {{\"msg\":\"request complete\",\"request_id\":\"{id}\",\"user\":\"{who}\"}}", at(t + 250))));
                ids.push((t, id));
            }
        }
        web.sort();
        cart.sort();
        let text = |lines: &[(u32, String)]| {
            lines
                .iter()
                .map(|(_, l)| format!("{l}\n"))
                .collect::<String>()
                .into_bytes()
        };
        let corpus = Corpus::read(
            &[
                ("web.log".into(), text(&web)),
                ("cart.log".into(), text(&cart)),
            ],
            Options::default(),
        );
        let links = links::learn(&corpus, &links::LinkOptions::default());
        let requests = stitch(&corpus, &rank(&corpus), &links, &StitchOptions::default());
        // Each request id's lines (web's start and end) are one request, and no other
        // request id's.
        let mut of_id: HashMap<&str, HashSet<u32>> = HashMap::default();
        for (i, (_, line)) in web.iter().enumerate() {
            let id = ids
                .iter()
                .find(|(_, id)| line.contains(id.as_str()))
                .expect("an id");
            of_id.entry(&id.1).or_default().insert(requests[i]);
        }
        let mut seen = HashSet::default();
        for (id, rs) in &of_id {
            assert_eq!(rs.len(), 1, "request {id} split: {requests:?}");
            let r = rs.iter().next().copied().unwrap_or(0);
            assert!(
                seen.insert(r),
                "request {id} merged with another: {requests:?}"
            );
        }
    }

    #[test]
    fn a_log_point_that_starts_requests_splits_them_and_pauses_within_one_do_not() {
        // Requests 400 ms apart: web logs "handle request", a step, a pause of 300 ms
        // (a call that logs nothing), the step again and the reply; db logs its query.
        let mut web = String::new();
        let mut db = String::new();
        let at = |k: u32, ms: u32| {
            let t = k * 400 + ms;
            format!("1970-01-01T00:00:{:02}.{:03}Z", t / 1000, t % 1000)
        };
        for k in 0..8 {
            web += &format!("{} handle request\n", at(k, 0));
            web += &format!("{} step one\n", at(k, 10));
            web += &format!("{} step one\n", at(k, 310));
            db += &format!("{} query done\n", at(k, 320));
            web += &format!("{} reply sent\n", at(k, 330));
        }
        let corpus = Corpus::read(
            &[
                ("web.log".into(), web.into_bytes()),
                ("db.log".into(), db.into_bytes()),
            ],
            Options::default(),
        );
        let ranked = rank(&corpus);
        let o = StitchOptions::default();
        // The first pass splits each request at its pause.
        let first = by_identifiers_and_time(&corpus, &ranked, &o);
        assert_ne!(first[0], first[2]);
        let links = links::learn(&corpus, &links::LinkOptions::default());
        let requests = stitch(&corpus, &ranked, &links, &o);
        for k in 0..8usize {
            let r = requests[4 * k];
            assert_eq!(
                &requests[4 * k..4 * k + 4],
                &[r; 4],
                "web lines of request {k}"
            );
            assert_eq!(requests[32 + k], r, "db line of request {k}");
            assert_eq!(r, k as u32);
        }
    }

    #[test]
    fn a_line_that_makes_a_value_joins_the_step_it_always_follows() {
        // Checkouts at irregular times: web takes the user's checkout, orders logs
        // "creating order" and, 9 ms later, the order it created (a fresh id, which web
        // prints in its reply). The order line passes its value on and nothing links to
        // it, as a request's first line would; but it always comes 9 ms after "creating
        // order", a step of the same request.
        let (mut web, mut orders) = (Vec::new(), Vec::new());
        let mut t = 0u64;
        for k in 0..40u64 {
            t += 300 + (k * 7919) % 800;
            let (user, order) = (k % 7, format!("{:08x}", k * 104_729 + 4_099));
            web.push((t, format!("{} checkout for user {user}", at_ms(t)), k));
            orders.push((t + 3, format!("{} creating order", at_ms(t + 3)), k));
            orders.push((
                t + 12,
                format!("{} order created id={order}", at_ms(t + 12)),
                k,
            ));
            web.push((
                t + 15,
                format!("{} checkout done order={order}", at_ms(t + 15)),
                k,
            ));
        }
        let (files, truth) = node_files(vec![("web.log", web), ("orders.log", orders)]);
        let corpus = Corpus::read(&files, Options::default());
        let lines = misplaced(&corpus, &truth);
        assert!(lines.is_empty(), "(line, request, true request): {lines:?}");
    }

    #[test]
    fn a_line_after_a_slow_step_joins_the_step_though_the_pause_sets_it_apart() {
        // Logins 0.4 to 2.5 s apart: web takes the login, auth checks the password and
        // issues a token 150 ms later, the request's last line. The pause sets the token
        // line apart in the first pass, where it is mostly the first and only line of its
        // request, as a request's start would be; but it always comes 150 ms after the
        // password check.
        let (mut web, mut auth) = (Vec::new(), Vec::new());
        let mut t = 0u64;
        for k in 0..30u64 {
            let user = k % 7;
            web.push((t, format!("{} login of user {user}", at_ms(t)), k));
            auth.push((
                t + 5,
                format!("{} password checked for user {user}", at_ms(t + 5)),
                k,
            ));
            auth.push((t + 155, format!("{} token issued", at_ms(t + 155)), k));
            t += 155 + 400 + (k * 7919) % 2100;
        }
        let (files, truth) = node_files(vec![("web.log", web), ("auth.log", auth)]);
        let corpus = Corpus::read(&files, Options::default());
        let lines = misplaced(&corpus, &truth);
        assert!(lines.is_empty(), "(line, request, true request): {lines:?}");
    }

    #[test]
    fn a_request_a_client_sends_right_after_another_begins_though_no_pause_sets_it_apart() {
        // Trip searches 0.3 to 1 s apart: travel takes the search, asks basic, and logs
        // the distance last. After one search in four, the client asks food for the
        // trip's meals 20 ms later, and food asks travel for the route: travel's lines
        // of both requests are one run, and food's first line always comes 20 ms after
        // the search's last. That line follows the search's log points in only one
        // search in four, though: it is the client's next call, not the search's step.
        let (mut travel, mut basic, mut food) = (Vec::new(), Vec::new(), Vec::new());
        let line =
            |ms: u64, text: &str, request: u64| (ms, format!("{} {text}", at_ms(ms)), request);
        let (mut t, mut request) = (0u64, 0u64);
        for k in 0..60u64 {
            t += 300 + (k * 7919) % 700;
            let search = request;
            travel.push(line(t, &format!("query trips from city {}", k % 5), search));
            basic.push(line(t + 3, "query for travels", search));
            travel.push(line(t + 8, "calculate distance", search));
            request += 1;
            if k % 4 == 0 {
                let meals = request;
                food.push(line(t + 28, "get food request", meals));
                food.push(line(t + 30, "get train food list", meals));
                travel.push(line(t + 33, "get route by trip", meals));
                food.push(line(t + 40, "food list done", meals));
                request += 1;
                t += 40;
            }
        }
        let (files, truth) = node_files(vec![
            ("travel.log", travel),
            ("basic.log", basic),
            ("food.log", food),
        ]);
        let corpus = Corpus::read(&files, Options::default());
        let lines = misplaced(&corpus, &truth);
        assert!(lines.is_empty(), "(line, request, true request): {lines:?}");
    }

    #[test]
    fn a_requests_last_line_joins_the_first_its_latency_counts_back_to() {
        // Requests 3 to 9 ms apart and 10 to 40 ms long on one node, up to a dozen at
        // once: a request id begins each, and its last line says only how long it took.
        let (files, truth) = durations::tests::timed_requests();
        let corpus = Corpus::read(&files, Options::default());
        // One file, each line its own: line n is the corpus's line n - 1.
        let lines: Vec<(u32, u32, u32)> = misplaced(&corpus, &truth)
            .into_iter()
            .filter(|&(n, _, _)| {
                corpus
                    .message(&corpus.lines[n as usize - 1], &files)
                    .contains("finished")
            })
            .collect();
        assert!(lines.is_empty(), "(line, request, true request): {lines:?}");
    }

    /// Overlapping requests 10 ms apart, each 25 ms long, on two nodes. A request prints
    /// its user (one of 13: an entity, not a request id) on both; the lines with no value
    /// come right after a log point of their own request. With `early`, the back node's
    /// log starts with that many requests of its own, a minute before the front node
    /// logs.
    fn overlapping_requests(early: u64) -> (Corpus, Vec<u32>) {
        let (files, truth) = overlapping_request_logs(early);
        (Corpus::read(&files, Options::default()), truth)
    }

    /// The logs of [`overlapping_requests`], and each line's true request.
    fn overlapping_request_logs(early: u64) -> (Vec<(String, Vec<u8>)>, Vec<u32>) {
        let (mut front, mut back) = (Vec::new(), Vec::new());
        let at = at_us;
        // The back node's own requests come 50 ms apart: further than any lag between
        // log points is learned. Then it pauses for a minute before the front node logs.
        let start = if early > 0 {
            early * 50_000 + 60_000_000
        } else {
            0
        };
        for k in 0..early {
            let (t, user) = (k * 50_000, k % 13);
            back.push((t, format!("{} loading profile of user {user}", at(t)), k));
            back.push((t + 1_000, format!("{} profile loaded", at(t + 1_000)), k));
        }
        for k in 0..120u64 {
            let (t, user, id) = (start + k * 10_000, k % 13, early + k);
            front.push((t, format!("{} serving user={user}", at(t)), id));
            back.push((
                t + 2_000,
                format!("{} loading profile of user {user}", at(t + 2_000)),
                id,
            ));
            back.push((t + 3_000, format!("{} profile loaded", at(t + 3_000)), id));
            front.push((
                t + 25_000,
                format!("{} rendered page for user {user}", at(t + 25_000)),
                id,
            ));
            front.push((t + 25_100, format!("{} reply sent", at(t + 25_100)), id));
        }
        node_files(vec![("front.log", front), ("back.log", back)])
    }

    /// A node's log file name and its lines: time, text, true request.
    type NodeLines<'a> = (&'a str, Vec<(u64, String, u64)>);

    /// Each node's log from its lines, sorted by time, and each line's true request in
    /// the order the files list them.
    fn node_files(nodes: Vec<NodeLines<'_>>) -> (Vec<(String, Vec<u8>)>, Vec<u32>) {
        let mut files = Vec::new();
        let mut truth = Vec::new();
        for (name, mut lines) in nodes {
            lines.sort();
            truth.extend(lines.iter().map(|l| l.2 as u32));
            let text: String = lines.iter().map(|l| format!("{}\n", l.1)).collect();
            files.push((name.to_string(), text.into_bytes()));
        }
        (files, truth)
    }

    /// The lines (number, request, true request) `stitch` puts in another request than
    /// the truth (both numbered in order of their first lines, as `stitch` numbers).
    fn misplaced(corpus: &Corpus, truth: &[u32]) -> Vec<(u32, u32, u32)> {
        let links = links::learn(corpus, &links::LinkOptions::default());
        let requests = stitch(corpus, &rank(corpus), &links, &StitchOptions::default());
        corpus
            .lines
            .iter()
            .zip(requests.iter().zip(&numbered(truth)))
            .filter(|(_, (r, t))| r != t)
            .map(|(l, (r, t))| (l.number, *r, *t))
            .collect()
    }

    #[test]
    fn overlapping_requests_are_told_apart_by_links_and_the_order_of_log_points() {
        let (corpus, truth) = overlapping_requests(0);
        let lines = misplaced(&corpus, &truth);
        assert!(lines.is_empty(), "(line, request, true request): {lines:?}");
    }

    #[test]
    fn a_node_that_logs_for_longer_leaves_the_links_between_the_others_as_they_were() {
        // A third node logging for ten minutes after the others: the chance that the
        // others print a value is reckoned over the time they logged, not the corpus's.
        // (Its own numbers may link to theirs; the links between the two are compared.)
        let learned = |files: &[(String, Vec<u8>)]| {
            let corpus = Corpus::read(files, Options::default());
            let links = links::learn(&corpus, &links::LinkOptions::default());
            let mut found: Vec<(links::Variable, links::Variable, i64)> = links
                .all()
                .into_iter()
                .filter(|l| l.from.0 < 2 && l.to.0 < 2)
                .map(|l| (l.from, l.to, l.window_ns))
                .collect();
            found.sort();
            found
        };
        let (mut files, _) = overlapping_request_logs(0);
        let alone = learned(&files);
        let late: String = (0..600u64)
            .map(|s| {
                format!(
                    "1970-01-01T00:{:02}:{:02}.000Z heartbeat {s}\n",
                    s / 60,
                    s % 60
                )
            })
            .collect();
        files.push(("late.log".into(), late.into_bytes()));
        assert_eq!(learned(&files), alone);
    }

    #[test]
    fn a_node_whose_log_starts_early_has_its_requests_told_apart_there_too() {
        // Before the front node logs, nothing precedes the back node's first log point:
        // a line at it, after a line of its own node it comes before, begins a request
        // instead of joining the line before.
        let (corpus, truth) = overlapping_requests(50);
        let lines = misplaced(&corpus, &truth);
        assert!(lines.is_empty(), "(line, request, true request): {lines:?}");
    }

    /// The time of a line `us` microseconds in.
    pub(super) fn at_us(us: u64) -> String {
        format!(
            "1970-01-01T00:{:02}:{:02}.{:06}Z",
            us / 60_000_000,
            us / 1_000_000 % 60,
            us % 1_000_000
        )
    }

    /// The time of a line `ms` milliseconds in.
    pub(super) fn at_ms(ms: u64) -> String {
        format!(
            "1970-01-01T00:{:02}:{:02}.{:03}Z",
            ms / 60_000,
            ms / 1000 % 60,
            ms % 1000
        )
    }

    /// Two nodes' logs read, and their links learned.
    fn two_nodes(a: (&str, String), b: (&str, String)) -> (Corpus, Links) {
        let files = [
            (a.0.into(), a.1.into_bytes()),
            (b.0.into(), b.1.into_bytes()),
        ];
        let corpus = Corpus::read(&files, Options::default());
        let links = links::learn(&corpus, &links::LinkOptions::default());
        (corpus, links)
    }

    #[test]
    fn a_value_passed_on_within_a_request_stays_with_it_while_others_begin() {
        // A request every 100 ms creates an order; a worker picks it up 210 ms later,
        // so the line before each pickup is the creation of another order, 10 ms
        // before: a learned predecessor whose request began since.
        let (mut web, mut worker) = (String::new(), String::new());
        for k in 0..40u64 {
            let (t, order) = (k * 100, 5000 + k * 7);
            web += &format!("{} created order {order}\n", at_ms(t));
            worker += &format!("{} processing order {order}\n", at_ms(t + 210));
        }
        let (corpus, links) = two_nodes(("web.log", web), ("worker.log", worker));
        let requests = stitch(&corpus, &rank(&corpus), &links, &StitchOptions::default());
        // web's 40 lines, then worker's.
        for k in 0..40 {
            assert_eq!(requests[40 + k], requests[k], "the pickup of order {k}");
        }
    }

    #[test]
    fn values_passed_on_stay_with_their_requests_past_the_prints_the_walk_keeps() {
        // A request a millisecond, each for one of 5 000 users, its backend call 2 ms
        // later, so that each backend line comes after two other requests' lines: only
        // the user links it to its own. 20 000 requests print far more values than
        // the walk keeps the latest prints of (it lets go of those older than the
        // longest link), and a user comes back every 5 s.
        let (mut front, mut back) = (String::new(), String::new());
        let requests = 20_000u64;
        for r in 0..requests {
            let user = 100_000 + r % 5_000;
            front += &format!("{} serving user {user}\n", at_ms(r));
            back += &format!("{} loading profile of user {user}\n", at_ms(r + 2));
        }
        let (corpus, links) = two_nodes(("front.log", front), ("back.log", back));
        let found = stitch(&corpus, &rank(&corpus), &links, &StitchOptions::default());
        // front's lines, then back's.
        let n = requests as usize;
        let misplaced: Vec<usize> = (0..n).filter(|&r| found[n + r] != found[r]).collect();
        assert!(
            misplaced.is_empty(),
            "{} backend lines misplaced: {:?}",
            misplaced.len(),
            &misplaced[..misplaced.len().min(10)]
        );
        let distinct: HashSet<u32> = found.iter().copied().collect();
        assert_eq!(distinct.len(), n);
    }

    #[test]
    fn a_value_passed_on_over_seconds_goes_to_the_request_begun_since() {
        // Orders are made every 400 ms and paid 2.5 s later by a request of their own,
        // which the payment service starts with a line of no values.
        let (mut web, mut pay) = (String::new(), String::new());
        for k in 0..30u64 {
            let (t, order) = (k * 400, 9000 + k * 13);
            web += &format!("{} created order {order}\n", at_ms(t));
            web += &format!("{} reply sent\n", at_ms(t + 5));
            pay += &format!("{} payment request received\n", at_ms(t + 2500));
            pay += &format!("{} paying order {order}\n", at_ms(t + 2501));
        }
        let (corpus, links) = two_nodes(("web.log", web), ("pay.log", pay));
        let slow = links.all().iter().any(|l| l.window_ns >= 1_000_000_000);
        assert!(slow, "{:#?}", links.all());
        let requests = stitch(&corpus, &rank(&corpus), &links, &StitchOptions::default());
        // web's 60 lines, then pay's.
        for k in 0..30 {
            let (order, payment) = (requests[2 * k], requests[60 + 2 * k]);
            assert_eq!(requests[60 + 2 * k + 1], payment, "payment {k}");
            assert_ne!(payment, order, "payment {k} is a request of its own");
        }
    }

    #[test]
    fn identifiers_are_pinned_and_excluded_by_name() {
        // "user" recurs across requests (an entity); "order" is printed once per line,
        // at one log point (so nothing says it identifies requests).
        let mut log = String::new();
        for k in 0..30 {
            // Half a second apart: one user's lines 1.5 s apart, within the id window.
            log += &format!(
                "1970-01-01T00:00:{:02}.{:03}Z order {} by user {}\n",
                k / 2,
                k % 2 * 500,
                1000 + k,
                k % 3
            );
        }
        let corpus = Corpus::read(&[("a.log".into(), log.into_bytes())], Options::default());
        let ranked = rank(&corpus);
        let names = |o: &StitchOptions| {
            let ids = identifiers(&ranked, o);
            let mut names: Vec<&str> = ranked
                .iter()
                .filter(|e| ids.contains(&e.variable))
                .map(|e| e.name.as_str())
                .collect();
            names.sort();
            names
        };
        let o = StitchOptions::default();
        assert!(names(&o).is_empty(), "{ranked:#?}");
        let pinned = StitchOptions {
            pinned: vec!["user".into()],
            ..StitchOptions::default()
        };
        assert_eq!(names(&pinned), ["user"]);
        // Lines of one user a second apart join once it is an identifier.
        let requests = by_identifiers_and_time(&corpus, &ranked, &pinned);
        assert_eq!(requests[0], requests[3]);
        assert_ne!(requests[0], requests[1]);
        let excluded = StitchOptions {
            pinned: vec!["user".into()],
            excluded: vec!["user".into()],
            ..StitchOptions::default()
        };
        assert_eq!(names(&excluded), ["user"], "pinning wins");
    }
}
