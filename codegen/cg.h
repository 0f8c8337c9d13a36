/* cg.h: the public interface of revc's LLVM code generator. */
#ifndef REVC_CG_H
#define REVC_CG_H

/* "19.1.7": the LLVM revc is linked against. */
const char *cg_llvm_version(void);

#endif
