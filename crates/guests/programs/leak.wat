;; Request A and request B each see a fresh instance, or this guest leaks: it answers with what
;; it finds in memory[1024..1032] and in the mutable global $g, then plants a secret in both.
;; A fresh instance always answers 16 zero bytes.
(module
  (memory (export "memory") 1)
  (global $g (mut i64) (i64.const 0))
  ;; The outcome at 2048: kind 1 (response), status 200, no headers, a 16-byte body at 2068.
  (data (i32.const 2048) "\01\00\00\00\c8\00\00\00\00\00\00\00\00\00\00\00\10\00\00\00")
  (func (export "edgegate_v1_handle") (param $request_len i32) (result i64)
    (i64.store (i32.const 2068) (i64.load (i32.const 1024)))
    (i64.store (i32.const 2076) (global.get $g))
    (i64.store (i32.const 1024) (i64.const 0x3131544552434553))
    (global.set $g (i64.const 0x3232544552434553))
    ;; (2048 << 32) | 36
    (i64.const 0x0000080000000024)))
