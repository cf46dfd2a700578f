;; The inner loops of the in-memory vector index (core/vector-search.ts), in WebAssembly with
;; 128-bit SIMD. The index keeps its rows in the imported memory; these functions only read rows
;; and write results at the offsets they are given. Built into core/kernels/vector-kernels.ts by
;; `npm run build:kernels` (the test suite checks that the two agree).
(module
  (import "env" "memory" (memory 1))

  ;; agree[s] = how many of the 64 * $words sign bits row s shares with the query, for s < $n:
  ;; rows of $words 64-bit words from $signs, the query's at $query, u16 results from $out.
  (func (export "agreements")
    (param $signs i32) (param $words i32) (param $n i32) (param $query i32) (param $out i32)
    (local $s i32) (local $j i32) (local $diff i32) (local $row i32) (local $bits i32)
    (local.set $row (local.get $signs))
    (local.set $bits (i32.shl (local.get $words) (i32.const 6)))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $s) (local.get $n)))
        (local.set $diff (i32.const 0))
        (local.set $j (i32.const 0))
        (block $row_done
          (loop $word
            (br_if $row_done (i32.ge_u (local.get $j) (local.get $words)))
            (local.set $diff
              (i32.add (local.get $diff)
                (i32.wrap_i64
                  (i64.popcnt
                    (i64.xor
                      (i64.load (i32.add (local.get $row) (i32.shl (local.get $j) (i32.const 3))))
                      (i64.load (i32.add (local.get $query) (i32.shl (local.get $j) (i32.const 3)))))))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $word)))
        (i32.store16
          (i32.add (local.get $out) (i32.shl (local.get $s) (i32.const 1)))
          (i32.sub (local.get $bits) (local.get $diff)))
        (local.set $row (i32.add (local.get $row) (i32.shl (local.get $words) (i32.const 3))))
        (local.set $s (i32.add (local.get $s) (i32.const 1)))
        (br $rows))))

  ;; out[p] = the dot product of the query's int8 codes with those of row pool[p], for p < $n:
  ;; rows of $stride bytes (a multiple of 16, zero-padded) from $codes, i32 row numbers from
  ;; $pool, the query's codes at $query, i32 results from $out.
  (func (export "dots")
    (param $codes i32) (param $stride i32) (param $pool i32) (param $n i32) (param $query i32) (param $out i32)
    (local $p i32) (local $row i32) (local $i i32) (local $acc v128) (local $a v128) (local $b v128)
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $p) (local.get $n)))
        (local.set $row
          (i32.add (local.get $codes)
            (i32.mul
              (i32.load (i32.add (local.get $pool) (i32.shl (local.get $p) (i32.const 2))))
              (local.get $stride))))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $i (i32.const 0))
        (block $row_done
          (loop $chunk
            (br_if $row_done (i32.ge_u (local.get $i) (local.get $stride)))
            (local.set $a (v128.load (i32.add (local.get $row) (local.get $i))))
            (local.set $b (v128.load (i32.add (local.get $query) (local.get $i))))
            (local.set $acc
              (i32x4.add (local.get $acc)
                (i32x4.add
                  (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $a)) (i16x8.extend_low_i8x16_s (local.get $b)))
                  (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $a)) (i16x8.extend_high_i8x16_s (local.get $b))))))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $chunk)))
        (i32.store
          (i32.add (local.get $out) (i32.shl (local.get $p) (i32.const 2)))
          (i32.add
            (i32.add (i32x4.extract_lane 0 (local.get $acc)) (i32x4.extract_lane 1 (local.get $acc)))
            (i32.add (i32x4.extract_lane 2 (local.get $acc)) (i32x4.extract_lane 3 (local.get $acc)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $each)))))
