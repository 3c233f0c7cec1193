//! [`LiveList`]: the bookkeeping lists a device keeps of things that may go away (its
//! streams' queues, their kept errors), pruned of the gone ones as they grow.
//!
//! Pruning on every addition makes creating the n-th stream cost a sweep of all n before
//! it — quadratic in the number of live streams (100,000 streams: tens of seconds). A
//! [`LiveList`] prunes only once it has doubled since its last prune, so each addition
//! costs a constant amount on average, and the list holds at most about twice what is
//! live (plus a small floor).

/// A list of `T`s, some of which may be gone, pruned as it grows (see the module docs).
#[derive(Debug)]
pub struct LiveList<T> {
    items: Vec<T>,
    prune_at: usize,
}

/// The length below which a list is never pruned.
const FLOOR: usize = 64;

impl<T> Default for LiveList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LiveList<T> {
    /// An empty list.
    pub const fn new() -> Self {
        LiveList { items: Vec::new(), prune_at: FLOOR }
    }

    /// Adds `item` at the end, first pruning the items for which `live` is false when the
    /// list has doubled since the last prune. Order is kept.
    pub fn push(&mut self, item: T, live: impl FnMut(&T) -> bool) {
        if self.items.len() >= self.prune_at {
            self.prune(live);
        }
        self.items.push(item);
    }

    /// Keeps only the items for which `live` is true (order kept), and sets the length at
    /// which [`push`](Self::push) prunes next.
    pub fn prune(&mut self, live: impl FnMut(&T) -> bool) {
        self.items.retain(live);
        self.prune_at = (self.items.len() * 2).max(FLOOR);
    }

    /// The items, gone ones not yet pruned included.
    pub fn items(&self) -> &[T] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn additions_look_at_each_item_a_constant_number_of_times() {
        // Every item stays live: the worst case for a prune on every push (n²/2 looks).
        let looks = Cell::new(0usize);
        let mut list = LiveList::new();
        let n = 100_000;
        for i in 0..n {
            list.push(i, |_| {
                looks.set(looks.get() + 1);
                true
            });
        }
        assert_eq!(list.items().len(), n);
        assert!(looks.get() <= 2 * n, "{} looks for {n} additions", looks.get());
    }

    #[test]
    fn gone_items_are_pruned_in_order_and_the_list_stays_bounded() {
        let mut list = LiveList::new();
        for i in 0..1000u32 {
            // Only multiples of 10 stay live.
            list.push(i, |&x| x % 10 == 0);
            let live = list.items().iter().filter(|&&x| x % 10 == 0).count();
            assert!(list.items().len() <= (2 * live).max(FLOOR) + 1, "{} items for {live} live", list.items().len());
        }
        list.prune(|&x| x % 10 == 0);
        assert_eq!(list.items(), (0..1000).step_by(10).collect::<Vec<_>>());
    }
}
