;; Returns an outcome pointer far outside its memory: an ABI violation, answered with 500.
(module
  (memory (export "memory") 1)
  (func (export "edgegate_v1_handle") (param i32) (result i64)
    (i64.const 0x7fff000000000010)))
