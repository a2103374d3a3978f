
.text
.globl __x86_return_thunk
__x86_return_thunk:
  call 1f
  int3
1: lea 8(%rsp), %rsp
  ret
  int3
.globl __x86_indirect_thunk_rax
__x86_indirect_thunk_rax:
  call 2f
3: pause
  lfence
  jmp 3b
2: mov %rax, (%rsp)
  ret
.section .note.GNU-stack,"",@progbits
