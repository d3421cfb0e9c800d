//! llama.cpp's q/k row permutation (its converter interleaves the two rotate-half halves of each
//! head) and its inverse, which gives HF's row order back.

/// llama.cpp's converter permutation of q/k rows (`w.reshape(h, 2, d/2, cols).swapaxes(1, 2)`):
/// HF's rotate-half row order to GGUF's interleaved order, for `heads` heads. Needed to write
/// GGUF files that llama.cpp reads.
pub fn permute_rows(values: &[f32], rows: usize, cols: usize, heads: usize) -> Vec<f32> {
    let hd = rows / heads;
    let half = hd / 2;
    let mut out = vec![0f32; values.len()];
    for h in 0..heads {
        for j in 0..2 {
            for i in 0..half {
                let src = h * hd + j * half + i;
                let dst = h * hd + i * 2 + j;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&values[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

/// The inverse of [`permute_rows`], for rows of `cols` elements of any kind (f32 values, or
/// the bytes of quantized blocks).
pub(crate) fn unpermute_rows<T: Copy + Default>(
    values: &[T],
    rows: usize,
    cols: usize,
    heads: usize,
) -> Vec<T> {
    let hd = rows / heads;
    let half = hd / 2;
    let mut out = vec![T::default(); values.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = h * hd + 2 * i + j;
                let dst = h * hd + j * half + i;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&values[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpp_permute() {
        let (rows, cols, heads) = (24, 3, 3);
        let hf: Vec<f32> = (0..rows * cols).map(|x| x as f32).collect();
        let gguf = permute_rows(&hf, rows, cols, heads);
        assert_ne!(gguf, hf);
        // Row 1 of head 0 in GGUF order is HF row d/2 = 4 (first element of the second half).
        assert_eq!(gguf[cols], hf[4 * cols]);
        assert_eq!(unpermute_rows(&gguf, rows, cols, heads), hf);
    }
}
