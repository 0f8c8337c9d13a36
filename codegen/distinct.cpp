/* distinct.cpp: distinct metadata nodes, which the LLVM C API has no
 * constructor for (LLVMMDNodeInContext2 makes uniqued ones, and an access
 * group must be distinct: LoopInfo's isValidAsAccessGroup).  Of revc it
 * includes only distinct.h.  Nothing here throws. */
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>

#include "distinct.h"

using namespace llvm;

LLVMMetadataRef cg_distinct_node(LLVMContextRef ctx)
{
	return wrap(MDNode::getDistinct(*unwrap(ctx), {}));
}
