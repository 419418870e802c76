# Every external dependency, found once (scripts/install-deps installs them from Debian packages).
# Modules link the imported targets; the package config (ropecheckConfig.cmake.in) finds the PUBLIC ones
# of the exported libraries again.
find_package(Boost 1.74 REQUIRED CONFIG)               # Boost.Multiprecision (header-only): the reference's scalar
find_package(PkgConfig REQUIRED)
pkg_check_modules(MPFR REQUIRED IMPORTED_TARGET mpfr)  # MPFR + GMP: the exact oracle
find_package(Eigen3 3.4 REQUIRED NO_MODULE)            # matrix view (R(m), A_k)
find_package(nlohmann_json 3.10 REQUIRED)              # spec / config / report JSON
find_package(CLI11 REQUIRED)                           # command line
find_package(fmt REQUIRED)                             # terminal formatting
find_package(Threads REQUIRED)                         # worker threads (golden tables, drift)
find_package(OpenMP COMPONENTS CXX)                    # threads in the CPU kernels (optional)
find_package(rapidcheck CONFIG REQUIRED)               # property generation and shrinking (no version file)
find_package(GTest 1.12 CONFIG QUIET)                  # tests and ropecheck::props_gtest (optional to the libraries)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)  # .npz reading (Debian's libzip CMake package is broken)
find_package(ZLIB REQUIRED)                            # CRC-32 for the .npz writer
find_package(OpenSSL REQUIRED)                         # SHA-256 of golden-set files
