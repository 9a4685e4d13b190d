// Shared by every stage: the linear invocation index of a 2D dispatch (large 1D work is split
// into rows of at most 65535 groups, the guaranteed minimum of GL_MAX_COMPUTE_WORK_GROUP_COUNT).
uint linear_group() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}
uint linear_invocation() {
    return linear_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
}
