/* Field slots (vtable indices) and union tags of the ExecuTorch schemas this
 * runtime reads: exir/_serialize/program.fbs (FBP_) and
 * devtools/bundled_program/schema/bundled_program_schema.fbs (FBB_), and the
 * ones it writes: devtools/etdump/etdump_schema_flatcc.fbs (FBD_).
 * Naming: FB?_<Table>__<field> = slot; a union field names its _type slot (the
 * value is the next slot). FB?U_<Union>__<Member> = union tag.
 * tests/test_schema_ids.py checks every number here against the installed
 * schemas, so an ExecuTorch upgrade that moves a field fails the tests. */
#ifndef ET_SCHEMA_IDS_H
#define ET_SCHEMA_IDS_H

#define FBP_FILE_IDENTIFIER "ET12"
#define FBB_FILE_IDENTIFIER "BP08"
/* Schema versions this runtime was written against. */
#define FBP_SCHEMA_VERSION 0u
#define FBB_SCHEMA_VERSION 2u

#define FBP_Program__version 0
#define FBP_Program__execution_plan 1
#define FBP_Program__constant_buffer 2
#define FBP_Program__backend_delegate_data 3
#define FBP_Program__segments 4
#define FBP_Program__constant_segment 5
#define FBP_Program__mutable_data_segments 6

#define FBP_ExecutionPlan__name 0
#define FBP_ExecutionPlan__values 2
#define FBP_ExecutionPlan__inputs 3
#define FBP_ExecutionPlan__outputs 4
#define FBP_ExecutionPlan__chains 5
#define FBP_ExecutionPlan__operators 6
#define FBP_ExecutionPlan__delegates 7
#define FBP_ExecutionPlan__non_const_buffer_sizes 8

#define FBP_EValue__val 0

#define FBP_Tensor__scalar_type 0
#define FBP_Tensor__storage_offset 1
#define FBP_Tensor__sizes 2
#define FBP_Tensor__dim_order 3
#define FBP_Tensor__data_buffer_idx 5
#define FBP_Tensor__allocation_info 6
#define FBP_Tensor__shape_dynamism 8
#define FBP_Tensor__extra_tensor_info 9

#define FBP_ExtraTensorInfo__location 2

#define FBP_AllocationDetails__memory_id 0
#define FBP_AllocationDetails__memory_offset_low 1
#define FBP_AllocationDetails__memory_offset_high 2

#define FBP_Int__int_val 0
#define FBP_Bool__bool_val 0
#define FBP_Double__double_val 0
#define FBP_String__string_val 0
#define FBP_IntList__items 0
#define FBP_DoubleList__items 0
#define FBP_BoolList__items 0
#define FBP_TensorList__items 0
#define FBP_OptionalTensorList__items 0

#define FBP_Operator__name 0
#define FBP_Operator__overload 1

#define FBP_KernelCall__op_index 0
#define FBP_KernelCall__args 1
#define FBP_DelegateCall__delegate_index 0
#define FBP_DelegateCall__args 1
#define FBP_MoveCall__move_from 0
#define FBP_MoveCall__move_to 1
#define FBP_JumpFalseCall__cond_value_index 0
#define FBP_JumpFalseCall__destination_instruction 1
#define FBP_FreeCall__value_index 0

#define FBP_Instruction__instr_args 0

#define FBP_Chain__inputs 0
#define FBP_Chain__outputs 1
#define FBP_Chain__instructions 2

#define FBP_BackendDelegate__id 0
#define FBP_BackendDelegate__processed 1
#define FBP_BackendDelegate__compile_specs 2
#define FBP_BackendDelegateDataReference__location 0
#define FBP_BackendDelegateDataReference__index 1
#define FBP_BackendDelegateInlineData__data 0

#define FBP_Buffer__storage 0

#define FBP_DataSegment__offset 0
#define FBP_DataSegment__size 1

#define FBP_SubsegmentOffsets__segment_index 0
#define FBP_SubsegmentOffsets__offsets 1

#define FBPU_KernelTypes__Null 1
#define FBPU_KernelTypes__Int 2
#define FBPU_KernelTypes__Bool 3
#define FBPU_KernelTypes__Double 4
#define FBPU_KernelTypes__Tensor 5
#define FBPU_KernelTypes__String 6
#define FBPU_KernelTypes__IntList 7
#define FBPU_KernelTypes__DoubleList 8
#define FBPU_KernelTypes__BoolList 9
#define FBPU_KernelTypes__TensorList 10
#define FBPU_KernelTypes__OptionalTensorList 11

#define FBPU_InstructionArguments__KernelCall 1
#define FBPU_InstructionArguments__DelegateCall 2
#define FBPU_InstructionArguments__MoveCall 3
#define FBPU_InstructionArguments__JumpFalseCall 4
#define FBPU_InstructionArguments__FreeCall 5

/* TensorShapeDynamism.STATIC */
#define FBPE_TensorShapeDynamism__STATIC 0
/* TensorDataLocation.SEGMENT */
#define FBPE_TensorDataLocation__SEGMENT 0
#define FBPE_DataLocation__INLINE 0
#define FBPE_DataLocation__SEGMENT 1

#define FBB_BundledProgram__version 0
#define FBB_BundledProgram__method_test_suites 1
#define FBB_BundledProgram__program 2
#define FBB_BundledMethodTestSuite__method_name 0
#define FBB_BundledMethodTestSuite__test_cases 1
#define FBB_BundledMethodTestCase__inputs 0
#define FBB_BundledMethodTestCase__expected_outputs 1
#define FBB_Value__val 0
#define FBB_Tensor__scalar_type 0
#define FBB_Tensor__sizes 1
#define FBB_Tensor__data 2
#define FBB_Tensor__dim_order 3
#define FBB_Int__int_val 0
#define FBB_Bool__bool_val 0
#define FBB_Double__double_val 0

#define FBBU_ValueUnion__Tensor 1
#define FBBU_ValueUnion__Int 2
#define FBBU_ValueUnion__Bool 3
#define FBBU_ValueUnion__Double 4

/* ETDump (written by etdump.c) */
#define FBD_FILE_IDENTIFIER "ED00"
#define FBD_ETDump__version 0
#define FBD_ETDump__run_data 1
#define FBD_RunData__name 0
#define FBD_RunData__bundled_input_index 1
#define FBD_RunData__events 3
#define FBD_Event__profile_event 0
#define FBD_ProfileEvent__name 0
#define FBD_ProfileEvent__chain_index 1
#define FBD_ProfileEvent__instruction_id 2
#define FBD_ProfileEvent__start_time 6
#define FBD_ProfileEvent__end_time 7
#define FBD_Event__debug_event 2
#define FBD_DebugEvent__chain_index 0
#define FBD_DebugEvent__instruction_id 1
#define FBD_DebugEvent__debug_entry 2
#define FBD_DebugEvent__name 5
#define FBD_Value__val 0
#define FBD_Value__tensor 1
#define FBDE_ValueType__Tensor 5
#define FBD_Tensor__scalar_type 0
#define FBD_Tensor__sizes 1
#define FBD_Tensor__strides 2
#define FBD_Tensor__offset 3

#endif
