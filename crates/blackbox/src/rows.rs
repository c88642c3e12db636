//! A table of rows of different lengths in two flat vectors. Linking keeps a few short
//! lists per message (its candidate causes, the messages it may have caused); millions
//! of small `Vec`s cost a header and an allocation each, these an offset per row.

pub(crate) struct Rows<T> {
    /// Row `i` is `items[start[i]..start[i + 1]]`. Offsets are 32-bit, as message
    /// indices are: half the room for millions of rows.
    start: Vec<u32>,
    items: Vec<T>,
}

/// An offset into a table's items.
fn offset(items: usize) -> u32 {
    u32::try_from(items).expect("a table of rows holds fewer than 2^32 items")
}

impl<T> Rows<T> {
    /// An empty table with room for `rows` rows.
    pub(crate) fn with_capacity(rows: usize) -> Rows<T> {
        let mut start = Vec::with_capacity(rows + 1);
        start.push(0);
        Rows {
            start,
            items: Vec::new(),
        }
    }

    /// Appends a row.
    pub(crate) fn push_row(&mut self, row: impl IntoIterator<Item = T>) {
        self.items.extend(row);
        self.start.push(offset(self.items.len()));
    }

    /// Row `i` (empty past the last row).
    pub(crate) fn row(&self, i: usize) -> &[T] {
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.items[a as usize..b as usize],
            _ => &[],
        }
    }

    pub(crate) fn row_mut(&mut self, i: usize) -> &mut [T] {
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => &mut self.items[a as usize..b as usize],
            _ => &mut [],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// Appends `other`'s rows after these.
    pub(crate) fn append(&mut self, other: Rows<T>) {
        let base = offset(self.items.len());
        self.items.extend(other.items);
        self.start
            .extend(other.start.iter().skip(1).map(|s| s + base));
    }

    /// Frees the room reserved and not used.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.start.shrink_to_fit();
        self.items.shrink_to_fit();
    }
}

impl<T: Copy + Default> Rows<T> {
    /// `rows` rows from `(row, item)` pairs in any order, each row's items in the order
    /// given. `pairs` is called twice: the rows are counted, then filled.
    pub(crate) fn grouped<I>(rows: usize, pairs: impl Fn() -> I) -> Rows<T>
    where
        I: Iterator<Item = (usize, T)>,
    {
        let mut start = vec![0u32; rows + 1];
        for (r, _) in pairs() {
            if r < rows {
                start[r + 1] += 1;
            }
        }
        for r in 0..rows {
            start[r + 1] += start[r];
        }
        let mut items = vec![T::default(); start[rows] as usize];
        let mut next = start.clone();
        for (r, item) in pairs() {
            if r < rows {
                items[next[r] as usize] = item;
                next[r] += 1;
            }
        }
        Rows { start, items }
    }
}

/// Optional message indices by message, `u32::MAX` for none: half the room of
/// `Option<u32>`, for millions of messages.
#[derive(Default)]
pub(crate) struct Indices(Vec<u32>);

const NO_INDEX: u32 = u32::MAX;

impl Indices {
    pub(crate) fn get(&self, i: usize) -> Option<u32> {
        self.0.get(i).copied().filter(|&x| x != NO_INDEX)
    }
}

impl FromIterator<Option<u32>> for Indices {
    fn from_iter<I: IntoIterator<Item = Option<u32>>>(it: I) -> Indices {
        Indices(it.into_iter().map(|x| x.unwrap_or(NO_INDEX)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pushed_and_grouped_read_back_as_given() {
        let mut pushed: Rows<u32> = Rows::with_capacity(3);
        pushed.push_row([1, 2]);
        pushed.push_row([]);
        pushed.push_row([3]);
        assert_eq!(pushed.len(), 3);
        assert_eq!(pushed.row(0), &[1, 2]);
        assert!(pushed.row(1).is_empty());
        assert_eq!(pushed.row(2), &[3]);
        assert!(pushed.row(3).is_empty());

        let pairs = [(2usize, 20u32), (0, 1), (2, 21), (9, 99), (0, 2)];
        let grouped = Rows::grouped(3, || pairs.iter().copied());
        assert_eq!(grouped.len(), 3);
        assert_eq!(grouped.row(0), &[1, 2]);
        assert!(grouped.row(1).is_empty());
        assert_eq!(grouped.row(2), &[20, 21]);

        pushed.append(grouped);
        assert_eq!(pushed.len(), 6);
        assert_eq!(pushed.row(2), &[3]);
        assert_eq!(pushed.row(3), &[1, 2]);
        assert!(pushed.row(4).is_empty());
        assert_eq!(pushed.row(5), &[20, 21]);
    }
}
