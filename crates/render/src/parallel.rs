//! Spreading independent pieces of work over the machine's cores.

use std::num::NonZero;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `items.iter().map(work).collect()`, with the items shared out among one thread per core as
/// each finishes its last (so uneven items balance out). Results are in the items' order.
pub fn map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, NonZero::get).min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let take_items = || {
        let mut done = Vec::new();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(index) else { return done };
            done.push((index, work(item)));
        }
    };
    let mut indexed: Vec<(usize, R)> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(take_items)).collect();
        let mut indexed = take_items();
        for helper in helpers {
            indexed.extend(helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        indexed
    });
    indexed.sort_unstable_by_key(|(index, _)| *index);
    indexed.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_are_in_item_order() {
        let items: Vec<u64> = (0..1000).collect();
        // Uneven work, so that the threads finish items out of order.
        let squares = super::map(&items, |&n| {
            std::hint::black_box((0..(n % 7) * 1000).sum::<u64>());
            n * n
        });
        assert_eq!(squares, items.iter().map(|n| n * n).collect::<Vec<_>>());
        assert_eq!(super::map(&[] as &[u64], |&n| n), Vec::<u64>::new());
    }
}
