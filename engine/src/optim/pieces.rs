//! SGD's and Adam's updates are one value at a time, so a large tensor may be cut into one piece a
//! thread without changing a bit (natively: wasm32 has no threads). A wide model's update moves
//! 20-28 bytes a parameter: cut over two cores, a d1024 SGD step of two sequences went from 19.7
//! to 17.3-17.9 ms (Adam's, nearer the memory's pace already, 20.3 to 19.2-19.8).

/// Values below which a tensor is updated whole (a thread's start costs more than it would do).
const MIN_PIECE: usize = 1 << 16;

/// The length of the pieces a tensor of `len` values is cut into for `threads` threads, a multiple
/// of 64 values (whole cache lines); None when it stays whole (one thread, a small tensor).
pub fn piece_len(threads: usize, len: usize) -> Option<usize> {
    let piece = len.div_ceil(threads.max(1)).next_multiple_of(64);
    (threads > 1 && piece >= MIN_PIECE && piece < len).then_some(piece)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_tensors_are_cut_in_whole_cache_lines_one_piece_a_thread() {
        assert_eq!(piece_len(1, 1 << 22), None);
        assert_eq!(piece_len(2, 1000), None);
        let len = 4 * 1024 * 1024 + 3;
        let piece = piece_len(2, len).unwrap();
        assert!(piece.is_multiple_of(64) && len.div_ceil(piece) == 2 && piece < len);
        assert_eq!(piece_len(3, 3 << 20).map(|p| (3usize << 20).div_ceil(p)), Some(3));
    }
}
