;; A worker built for a future ABI version 2: the host must refuse it at load time.
(module
  (memory (export "memory") 1)
  (func (export "edgegate_v2_handle") (param i32) (result i64) (i64.const 0)))
