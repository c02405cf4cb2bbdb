;; Not an edgegate worker at all: no entry point.
(module
  (memory (export "memory") 1)
  (func (export "main")))
